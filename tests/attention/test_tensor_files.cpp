// Attention tensors from .npy and .safetensors files: every dtype read back exactly, 3-D and 4-D
// shapes, and each malformed file named with its problem.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <bit>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "numerics/npy.hpp"
#include "numerics/safetensors.hpp"
#include "numerics/tensor_file.hpp"

using namespace lowbit;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("lowbit_tensor_" + std::to_string(::getpid()) + "_" + name)).string();
}

// A .npy file with this header dict and raw data, as numpy writes it (version 1.0).
void write_raw_npy(const std::string& path, const std::string& dict, const std::string& data) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  out.put(char(header.size() & 0xff));
  out.put(char(header.size() >> 8));
  out << header << data;
}

std::string bytes16(const std::vector<std::uint16_t>& v) {
  std::string s;
  for (auto x : v) s += char(x & 0xff), s += char(x >> 8);
  return s;
}

// A .safetensors file from a header text and data bytes.
void write_raw_safetensors(const std::string& path, const std::string& header, const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  for (int b = 0; b < 8; ++b) out.put(char((std::uint64_t(header.size()) >> (8 * b)) & 0xff));
  out << header << data;
}

}  // namespace

TEST_CASE(".npy: float32, float16 and bfloat16 ('<V2', as ml_dtypes saves it), 3-D and 4-D", "[tensor-files]") {
  const std::string p = temp_path("a.npy");
  // bfloat16 1.0 = 0x3f80, -2.5 = 0xc020, 2^-133 (subnormal) = 0x0001; float16 1.0 = 0x3c00, -2.5 = 0xc100.
  write_raw_npy(p, "{'descr': '<V2', 'fortran_order': False, 'shape': (1, 3, 1), }", bytes16({0x3f80, 0xc020, 0x0001}));
  TensorFile t = read_tensor_file(p);
  CHECK(t.type == ElementType::bf16);
  CHECK((t.tensor.batch == 1 && t.tensor.heads == 1 && t.tensor.tokens == 3 && t.tensor.dim == 1));
  CHECK(t.tensor.values == std::vector<float>{1.0f, -2.5f, std::ldexp(1.0f, -133)});
  write_raw_npy(p, "{'descr': '<f2', 'fortran_order': False, 'shape': (2, 1, 1, 1), }", bytes16({0x3c00, 0xc100}));
  t = read_tensor_file(p);
  CHECK(t.type == ElementType::f16);
  CHECK((t.tensor.batch == 2 && t.tensor.heads == 1));
  CHECK(t.tensor.values == std::vector<float>{1.0f, -2.5f});
  write_npy(p, {2, 3, 4}, std::vector<float>(24, 0.75f));
  t = read_tensor_file(p);
  CHECK(t.type == ElementType::f32);
  CHECK((t.tensor.batch == 1 && t.tensor.heads == 2 && t.tensor.tokens == 3 && t.tensor.dim == 4));
  std::filesystem::remove(p);
}

TEST_CASE(".npy: bad files are named with their problem", "[tensor-files][bad-input]") {
  const std::string p = temp_path("bad.npy");
  write_npy(p, {3, 4}, std::vector<float>(12, 1.0f));
  CHECK_THROWS_WITH(read_tensor_file(p), Catch::Contains(p + ": shape [3, 4] has 2 dimensions"));
  write_npy(p, {1, 0, 4}, {});
  CHECK_THROWS_WITH(read_tensor_file(p), Catch::Contains("empty or huge dimension"));
  write_raw_npy(p, "{'descr': '<i4', 'fortran_order': False, 'shape': (1, 1, 1), }", "abcd");
  CHECK_THROWS_WITH(read_tensor_file(p), Catch::Contains(p + ": dtype <i4 is not supported"));
  write_raw_npy(p, "{'descr': '>f4', 'fortran_order': False, 'shape': (1, 1, 1), }", "abcd");
  CHECK_THROWS_WITH(read_tensor_file(p), Catch::Contains("dtype >f4 is not supported"));
  write_raw_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 3), }", std::string(20, '\0'));
  CHECK_THROWS_WITH(read_tensor_file(p), Catch::Contains("data ends after 20 of 24 bytes"));
  write_raw_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (100000000000, 100000000, 3), }", "");
  CHECK_THROWS_WITH(read_tensor_file(p), Catch::Contains("is too large"));
  CHECK_THROWS_WITH(read_tensor_file(temp_path("missing.npy")), Catch::Contains("missing.npy: cannot open"));
  std::filesystem::remove(p);
}

TEST_CASE(".safetensors: F32, F16, BF16 written and read back exactly", "[tensor-files]") {
  const std::string p = temp_path("t.safetensors");
  const std::vector<float> values{1.0f, -2.5f, 0.375f, 65504.0f, -0.0f, 3.0f};
  write_safetensors(p, {{"q", "F16", {1, 2, 3, 1}, values},
                        {"k", "BF16", {2, 3, 1}, {1.0f, -2.5f, 0.375f, 3.0f, -0.0f, 0x1p-130f}},
                        {"v", "F32", {1, 1, 2, 3}, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f}}});
  CHECK(safetensors_names(p) == std::vector<std::string>{"k", "q", "v"});
  TensorFile q = read_tensor_file(p + ":q");
  CHECK(q.type == ElementType::f16);
  CHECK(q.tensor.values == values);
  CHECK((q.tensor.heads == 2 && q.tensor.tokens == 3));
  TensorFile k = read_tensor_file(p + ":k");
  CHECK(k.type == ElementType::bf16);
  CHECK(k.tensor.values == std::vector<float>{1.0f, -2.5f, 0.375f, 3.0f, -0.0f, 0x1p-130f});
  CHECK((k.tensor.batch == 1 && k.tensor.heads == 2));
  CHECK(read_tensor_file(p + ":v").tensor.values == std::vector<float>{0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f});
  std::filesystem::remove(p);
}

TEST_CASE(".safetensors: bad files are named with their problem", "[tensor-files][bad-input]") {
  const std::string p = temp_path("bad.safetensors");
  const std::string four(4 * 6, '\0');
  write_raw_safetensors(p, R"({"q": {"dtype": "F32", "shape": [1, 2, 3], "data_offsets": [0, 24]}})", four);
  CHECK(read_tensor_file(p + ":q").tensor.size() == 6);
  CHECK_THROWS_WITH(read_tensor_file(p + ":k"), Catch::Contains(p + ": no tensor 'k' (it holds: q)"));
  CHECK_THROWS_WITH(read_tensor_file(p), Catch::Contains("name the tensor as FILE.safetensors:NAME (it holds: q)"));
  write_raw_safetensors(p, R"({"q": {"dtype": "I32", "shape": [1, 2, 3], "data_offsets": [0, 24]}})", four);
  CHECK_THROWS_WITH(read_tensor_file(p + ":q"), Catch::Contains("tensor 'q': dtype I32 is not supported (F32, F16, BF16)"));
  write_raw_safetensors(p, R"({"q": {"dtype": "F32", "shape": [1, 2, 3], "data_offsets": [0, 20]}})", four);
  CHECK_THROWS_WITH(read_tensor_file(p + ":q"), Catch::Contains("hold 20 bytes; shape [1,2,3] of F32 needs 24"));
  write_raw_safetensors(p, R"({"q": {"dtype": "F32", "shape": [1, 2, 3], "data_offsets": [0, 24]}})", four.substr(0, 10));
  CHECK_THROWS_WITH(read_tensor_file(p + ":q"), Catch::Contains("data ends at byte 24 of a data section of 10 bytes"));
  write_raw_safetensors(p, R"({"q": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}})", four);
  CHECK_THROWS_WITH(read_tensor_file(p + ":q"), Catch::Contains("shape [2, 3] has 2 dimensions"));
  write_raw_safetensors(p, R"({"q": {"dtype": "F32", "shape": "big", "data_offsets": [0, 24]}})", four);
  CHECK_THROWS_WITH(read_tensor_file(p + ":q"), Catch::Contains("lacks a dtype string, a shape list or two data_offsets"));
  write_raw_safetensors(p, R"({"q": {"dtype": "F32",)", four);
  CHECK_THROWS_WITH(read_tensor_file(p + ":q"), Catch::Contains("header is not JSON"));
  {  // a header length beyond the file
    std::ofstream out(p, std::ios::binary);
    out << std::string("\xff\xff\xff\x00\x00\x00\x00\x00", 8) << "{}";
  }
  CHECK_THROWS_WITH(read_tensor_file(p + ":q"), Catch::Contains("exceeds the file"));
  {
    std::ofstream out(p, std::ios::binary);
    out << "abc";
  }
  CHECK_THROWS_WITH(read_tensor_file(p + ":q"), Catch::Contains("not a .safetensors file"));
  CHECK_THROWS_WITH(read_tensor_file(temp_path("missing.safetensors") + ":q"), Catch::Contains("cannot open"));
  std::filesystem::remove(p);
}

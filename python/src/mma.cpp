// Tensor-core instructions for Python: the registry (mma/instruction.hpp) and one tile through
// its model (mma/arithmetic.hpp's execute, what `lowbit verify-vectors` runs on every tile).
#include <optional>
#include <stdexcept>
#include <string>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "arrays.hpp"
#include "bindings.hpp"
#include "emulation/mma/arithmetic.hpp"
#include "emulation/mma/instruction.hpp"

namespace lowbit::python {

namespace {

nb::dict instruction_info(const std::string& arch, const std::string& name) {
  const mma::Instruction in = mma::find_instruction(arch, name);
  const mma::Atom& at = in.atom;
  nb::dict d;
  d["arch"] = in.arch;
  d["name"] = at.name.str();
  d["issue"] = std::string(mma::to_string(at.issue));
  d["m"] = at.m;
  d["n"] = at.n;
  d["k"] = at.k;
  d["a"] = format_name(at.a);
  d["b"] = format_name(at.b);
  d["c"] = format_name(at.c);
  d["d"] = format_name(at.d);
  d["scale"] = at.block_scaled() ? nb::cast(format_name(at.scale)) : nb::none();
  d["scale_block"] = at.scale_block;
  d["verification"] = std::string(mma::to_string(in.source.status));
  d["reference"] = std::string(in.source.reference);
  d["note"] = std::string(in.source.note);
  return d;
}

// A tile operand: uint32 codes of `rows` x `cols`.
std::span<const Code> tile(const InArray& x, const char* what, int rows, int cols, const mma::Atom& at) {
  if (x.itemsize() != 4 || x.dtype().code != std::uint8_t(nb::dlpack::dtype_code::UInt))
    throw std::invalid_argument(std::string(what) + ": expected uint32 codes");
  if (x.ndim() != 2 || x.shape(0) != std::size_t(rows) || x.shape(1) != std::size_t(cols)) {
    std::string shape;
    for (std::size_t i = 0; i < x.ndim(); ++i) shape += (i ? ", " : "") + std::to_string(x.shape(i));
    throw std::invalid_argument(std::string(what) + " has shape [" + shape + "]; " + at.name.str() + " takes " + what +
                                " as " + std::to_string(rows) + " x " + std::to_string(cols));
  }
  return {static_cast<const Code*>(x.data()), x.size()};
}

nb::object run_mma(const std::string& arch, const std::string& name, const InArray& a, const InArray& b,
                   const InArray& c, std::optional<InArray> scale_a, std::optional<InArray> scale_b) {
  const mma::Instruction in = mma::find_instruction(arch, name);
  const mma::Atom& at = in.atom;
  mma::TileInputs tiles{tile(a, "a", at.m, at.k, at), tile(b, "b", at.k, at.n, at), tile(c, "c", at.m, at.n, at)};
  if (at.block_scaled() != (scale_a.has_value() && scale_b.has_value()))
    throw std::invalid_argument(at.name.str() + (at.block_scaled() ? " is block-scaled: give scale_a and scale_b"
                                                                    : " takes no block scales (scale_a, scale_b)"));
  if (at.block_scaled()) {
    tiles.scale_a = tile(*scale_a, "scale_a", at.m, at.scale_columns(), at);
    tiles.scale_b = tile(*scale_b, "scale_b", at.scale_columns(), at.n, at);
  }
  if (auto why = mma::check_inputs(at, tiles)) throw std::invalid_argument(*why);
  std::vector<std::uint32_t> d;
  {
    nb::gil_scoped_release release;
    d = mma::execute(in, tiles);
  }
  return nb::cast(to_numpy(std::move(d), {std::size_t(at.m), std::size_t(at.n)}));
}

}  // namespace

void register_mma(nb::module_& m) {
  m.def("instructions", [] { return mma::modeled_instructions(); });
  m.def("instruction", &instruction_info, nb::arg("arch"), nb::arg("name"));
  m.def("mma", &run_mma, nb::arg("arch"), nb::arg("name"), nb::arg("a"), nb::arg("b"), nb::arg("c"),
        nb::arg("scale_a").none(), nb::arg("scale_b").none());
}

}  // namespace lowbit::python

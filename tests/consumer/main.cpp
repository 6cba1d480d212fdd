// Uses the installed lowbit package: a conversion, a tensor-core instruction and an attention
// preset. Prints one line the test (run.cmake) checks; exits 1 on a wrong result.
#include <cstdio>

#include "emulation/attention/pipeline.hpp"
#include "emulation/convert.hpp"
#include "emulation/mma/instruction.hpp"

int main() {
  const lowbit::Code code = lowbit::encode(lowbit::formats::e4m3, 1.3);  // 1.25: 0 0111 010
  const auto mma = lowbit::mma::find_instruction("sm_90", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32");
  const auto pipeline = lowbit::attention::preset("sage2-8b", 128);
  std::printf("e4m3(1.3) = 0x%02x; %s k = %d; sage2-8b qk %s\n", unsigned(code), mma.atom.name.c_str(), mma.atom.k,
              pipeline.qk.instruction.c_str());
  return code == 0x3a && mma.atom.k == 32 ? 0 : 1;
}

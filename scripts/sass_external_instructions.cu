// The instructions behind Khattak & Mikaitis' recorded tiles (verification/vectors/external/), as nvcc
// compiles them: the WMMA shapes their programs use and the mma.sync forms we model. Compiled to
// SASS and counted by scripts/sass_external_instructions.sh; nothing here runs.
#include <cstdint>
#include <mma.h>

using namespace nvcuda;

// WMMA m16n16k16 (f16 -> f32) and m16n16k8 (tf32), as their wmma_fp16_bf16_tf32_input.cu uses them.
__global__ void wmma_f16_m16n16k16(const half* a, const half* b, float* c) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::load_matrix_sync(fc, c, 16, wmma::mem_row_major);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}

__global__ void wmma_tf32_m16n16k8(const float* a, const float* b, float* c) {
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> fc;
  wmma::load_matrix_sync(fa, a, 8);
  wmma::load_matrix_sync(fb, b, 8);
  wmma::load_matrix_sync(fc, c, 16, wmma::mem_row_major);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}

__global__ void mma_tf32_m16n8k4(const std::uint32_t* in, std::uint32_t* out) {
  float c[4] = {__uint_as_float(in[6]), 0.0f, 0.0f, 0.0f};
  asm volatile("mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(in[0]), "r"(in[1]), "r"(in[4]));
  out[threadIdx.x] = __float_as_uint(c[0] + c[1] + c[2] + c[3]);
}

__global__ void mma_tf32_m16n8k8(const std::uint32_t* in, std::uint32_t* out) {
  float c[4] = {__uint_as_float(in[6]), 0.0f, 0.0f, 0.0f};
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(in[0]), "r"(in[1]), "r"(in[2]), "r"(in[3]), "r"(in[4]), "r"(in[5]));
  out[threadIdx.x] = __float_as_uint(c[0] + c[1] + c[2] + c[3]);
}

#if __CUDA_ARCH__ >= 890
__global__ void mma_e4m3_m16n8k32_f32(const std::uint32_t* in, std::uint32_t* out) {
  float c[4] = {__uint_as_float(in[6]), 0.0f, 0.0f, 0.0f};
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(in[0]), "r"(in[1]), "r"(in[2]), "r"(in[3]), "r"(in[4]), "r"(in[5]));
  out[threadIdx.x] = __float_as_uint(c[0] + c[1] + c[2] + c[3]);
}

__global__ void mma_e4m3_m16n8k32_f16(const std::uint32_t* in, std::uint32_t* out) {
  std::uint32_t c[2] = {in[6], in[7]};
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};"
               : "+r"(c[0]), "+r"(c[1])
               : "r"(in[0]), "r"(in[1]), "r"(in[2]), "r"(in[3]), "r"(in[4]), "r"(in[5]));
  out[threadIdx.x] = c[0] ^ c[1];
}
#endif

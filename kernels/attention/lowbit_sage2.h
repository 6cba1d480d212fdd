/* The SageAttention2-8b Hopper kernels (sage2_attention.hpp) behind a C interface, built as the
 * shared library liblowbit_sage2.so, so that any process (Python through ctypes, next to PyTorch or
 * FlashAttention) launches them on its own device buffers and streams. What they compute is
 * sage2_attention.hpp's contract: the emulated preset sage2-8b (exp2 = polynomial) or sage2-8b-ex2
 * (exp2 = sm90-ex2), with row-sum=pv where row_sum is LOWBIT_SAGE2_ROW_SUM_PV, predicts every bit of
 * the output and of the LSE.
 *
 * A workspace holds a problem and the device buffers of its quantized operands. Calls return 0;
 * LOWBIT_SAGE2_INVALID for a problem, pointer or workspace they refuse (the problem's validation, a
 * null or misaligned pointer); LOWBIT_SAGE2_FAILED when the GPU or CUDA failed (no Hopper GPU, an
 * allocation, a launch). The reason goes, NUL-terminated and truncated to error_size, into `error`
 * when it is not null. Launches are asynchronous on `stream` (a cudaStream_t as an integer; 0: the default stream);
 * the kernels' own errors surface at the next synchronizing CUDA call. Inputs must be finite.
 *
 * Buffers (device, contiguous, the problem's layout):
 *   q, out: [batch, heads_q, tokens, head_dim] (layout bhnd) or [batch, tokens, heads_q, head_dim] (bnhd)
 *   k, v:   the same with heads_kv; dtype fp16 or bf16 for all four
 *   lse:    float32 [batch, heads_q, tokens] (natural log)
 */
#ifndef LOWBIT_KERNELS_ATTENTION_LOWBIT_SAGE2_H
#define LOWBIT_KERNELS_ATTENTION_LOWBIT_SAGE2_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Raised whenever a struct or a function's signature changes. */
#define LOWBIT_SAGE2_ABI_VERSION 2

enum { LOWBIT_SAGE2_OK = 0, LOWBIT_SAGE2_INVALID = 1, LOWBIT_SAGE2_FAILED = 2 };
enum { LOWBIT_SAGE2_FP16 = 0, LOWBIT_SAGE2_BF16 = 1 };
enum { LOWBIT_SAGE2_BHND = 0, LOWBIT_SAGE2_BNHD = 1 };
enum { LOWBIT_SAGE2_EXP2_POLYNOMIAL = 0, LOWBIT_SAGE2_EXP2_SM90_EX2 = 1 };
enum { LOWBIT_SAGE2_SERIAL = 0, LOWBIT_SAGE2_OVERLAPPED = 1 };
enum { LOWBIT_SAGE2_ROW_SUM_LANES = 0, LOWBIT_SAGE2_ROW_SUM_PV = 1 };

typedef struct lowbit_sage2_problem {
  int32_t batch, heads_q, heads_kv, tokens, head_dim;
  int32_t causal;   /* 0 or 1 */
  int32_t dtype;    /* LOWBIT_SAGE2_FP16, LOWBIT_SAGE2_BF16 */
  int32_t layout;   /* LOWBIT_SAGE2_BHND, LOWBIT_SAGE2_BNHD */
  int32_t exp2;     /* LOWBIT_SAGE2_EXP2_POLYNOMIAL, LOWBIT_SAGE2_EXP2_SM90_EX2 */
  int32_t schedule; /* LOWBIT_SAGE2_SERIAL, LOWBIT_SAGE2_OVERLAPPED */
  int32_t row_sum;  /* LOWBIT_SAGE2_ROW_SUM_LANES, LOWBIT_SAGE2_ROW_SUM_PV (serial, exp2 sm90-ex2) */
} lowbit_sage2_problem;

typedef struct lowbit_sage2_workspace lowbit_sage2_workspace;

int lowbit_sage2_abi_version(void);
/* Where the library came from, as JSON: the commit it was built from, the compiler, the date, and the
 * first GPU's name, driver and CUDA runtime when there is one (numerics/provenance.hpp's record). */
const char* lowbit_sage2_provenance(void);
/* The problem's validation alone (no GPU needed). */
int lowbit_sage2_validate(const lowbit_sage2_problem* problem, char* error, size_t error_size);
/* Allocates the quantized buffers on the current device; *workspace is null on failure. */
int lowbit_sage2_workspace_create(const lowbit_sage2_problem* problem, lowbit_sage2_workspace** workspace,
                                  char* error, size_t error_size);
void lowbit_sage2_workspace_destroy(lowbit_sage2_workspace* workspace);
/* Step 1: q, k, v -> the workspace's quantized operands. */
int lowbit_sage2_quantize(lowbit_sage2_workspace* workspace, const void* q, const void* k, const void* v,
                          uintptr_t stream, char* error, size_t error_size);
/* Step 2: the attention kernel on the workspace's quantized operands -> out, lse. */
int lowbit_sage2_attention_quantized(lowbit_sage2_workspace* workspace, void* out, float* lse, uintptr_t stream,
                                     char* error, size_t error_size);
/* Both steps. */
int lowbit_sage2_attention(lowbit_sage2_workspace* workspace, const void* q, const void* k, const void* v, void* out,
                           float* lse, uintptr_t stream, char* error, size_t error_size);
/* For benchmarks beside the kernels: the SM clock in MHz, measured on the current GPU after the work
 * queued on `stream` (kernels/device.hpp, sm_clock_mhz); waits for the stream. */
int lowbit_sage2_sm_clock_mhz(uintptr_t stream, double* mhz, char* error, size_t error_size);

#ifdef __cplusplus
}
#endif

#endif

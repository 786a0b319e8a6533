// matmul_bf16.h — the three products of matmul.h with bf16 inputs and a float output.
//
//   matmul_bf16_nt(c, a, b):  c (M,N) = alpha · a (M,K) · b (N,K)ᵀ + beta · c
//   matmul_bf16_nn(c, a, b):  c (M,N) = alpha · a (M,K) · b (K,N)  + beta · c
//   matmul_bf16_tn(c, a, b):  c (M,N) = alpha · a (K,M)ᵀ · b (K,N) + beta · c
//
// Each operand a Mat {data, rows, cols, ld} as stored, beta 0 (overwrite) or 1 (add into c), as
// in matmul.h. Every product of two bf16 numbers is exact in float (8 + 8 significant bits fit in
// 24), and the sums run in float: the only precision dropped is the rounding of the inputs,
// which the caller did (bf16_round). c stays float, so β = 1 adds into a float gradient.
//
// Two ways to run them, picked once per process (matmul_bf16_backend):
//   onednn  oneDNN's matmul primitive with bf16 source and weights and a float destination
//           (onednn_matmul.h), when the build has oneDNN (HANDGRAD_ONEDNN) and the CPU has
//           the AVX512_BF16 dot-product instructions. The first training step makes the
//           primitives; later steps reuse them.
//   widen   everywhere else: the bf16 inputs widened back to float (exactly) and the float
//           products of matmul.h run on them. The same numbers up to the order of the float
//           sums, at the speed of the float path plus the widening: bf16 then changes the
//           results, never the speed.
#pragma once
#include <string>

#include "lib/kernels/bf16.h"
#include "lib/kernels/matmul.h"

namespace hg {

void matmul_bf16_nt(Mat<float> c, Mat<const bf16> a, Mat<const bf16> b, float alpha, float beta);
// c (M,N) = a (M,K) · b (N,K)ᵀ + bias (N) on every row: a linear layer's forward. oneDNN adds the
// bias as it writes c (one pass over c); the widening path copies it into c first and adds the
// product onto it (β = 1).
void matmul_bf16_nt_bias(Mat<float> c, Mat<const bf16> a, Mat<const bf16> b, const float* bias);
void matmul_bf16_nn(Mat<float> c, Mat<const bf16> a, Mat<const bf16> b, float alpha, float beta);
void matmul_bf16_tn(Mat<float> c, Mat<const bf16> a, Mat<const bf16> b, float alpha, float beta);

enum class Bf16Backend { OneDNN, Widen };
// Which one runs, and why, in words for a run's header line.
Bf16Backend matmul_bf16_backend();
std::string matmul_bf16_describe();
// Tests: run the widening path even where oneDNN could run (false: back to the choice above).
void matmul_bf16_force_widen(bool on);

}  // namespace hg

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
// Two ways to run them (matmul_bf16_backends), one per process at a time, like matmul.h's
// float backends (matmul_bf16_use; set it before a run, never while products are running):
//   onednn  oneDNN's matmul primitive with bf16 source and weights and a float destination
//           (onednn_matmul.h), when the build has oneDNN (HANDGRAD_ONEDNN) and the CPU has
//           the AVX512_BF16 dot-product instructions. The first training step makes the
//           primitives; later steps reuse them.
//   widen   everywhere: the bf16 inputs widened back to float (exactly) and the float products
//           of matmul.h run on them, on its backend. The same numbers up to the order of the
//           float sums, at the speed of the float path plus the widening.
// Which is faster depends on the CPU (its bf16 dot products against its float FMAs), so a
// training run times both at start-up (lib/train/batch_threads.h) unless --matmul_bf16 names
// one; until a way is set, the first of matmul_bf16_backends() runs. Like the float backends,
// each way repeats itself bit for bit, and the two differ in the last bits.
#pragma once
#include <string>
#include <vector>

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
std::string to_string(Bf16Backend w);                  // "onednn" | "widen"
Bf16Backend parse_bf16_backend(const std::string& s);  // hg::Error naming anything else
std::vector<Bf16Backend> matmul_bf16_backends();       // the ways that run here: onednn first, widen last
// Which way the bf16 products take from now on (hg::Error if it cannot run here), and which one runs.
void matmul_bf16_use(Bf16Backend w);
Bf16Backend matmul_bf16_backend();
// The way that runs, in words for a run's header line; and why oneDNN's cannot run here ("" when it can).
std::string matmul_bf16_describe();
std::string matmul_bf16_no_onednn();
// Tests: run the widening path even where oneDNN could run (false: back to the first way).
void matmul_bf16_force_widen(bool on);
// Runs a bf16 `call` (MatmulCall::bf16) once, alpha 1, the way in use, on the given buffers.
void matmul_bf16_run(const MatmulCall& call, float* c, const bf16* a, const bf16* b);

}  // namespace hg

// onednn_matmul.h — oneDNN's matmul primitive on bf16 inputs, the product behind the bf16
// products' onednn way (matmul_bf16.h):
//
//   c(M,N) = alpha · op(a)(M,K) · op(b)(K,N) + beta · c  (+ bias(N) on every row, when given)
//
// row-major with leading dimensions, op(a) = a(M,K) or, transposed, a stored (K,M) (ta); op(b)
// = b(K,N) or b stored (N,K) (tb). a and b are bf16; c and the bias are float, and the sums are
// float. A transposed operand is a different stride for oneDNN, never a copy. (The float
// products' onednn backend is oneDNN's dnnl_sgemm, matmul.cpp: on one thread, which is how our
// split runs every part, it was faster than this primitive on float inputs.)
//
// One primitive per product (transposes, sizes, strides, alpha, beta, bias or not)
// and thread count — the caller's OpenMP threads outside a parallel region, 1 inside one, where
// nested regions are off and oneDNN runs on the calling thread alone — in a list of each calling
// thread's own, made on first use and kept to the thread's end, with its scratchpad (our own
// buffer: oneDNN's user scratchpad mode). The memory objects' data pointers are set before each
// call, so two threads never share one. A list holds a few dozen entries for a model: its
// products' shapes.
//
// What a call allocates: nothing of the product's size (data and scratchpad are the caller's and
// the primitive's own, kept). oneDNN's execute still makes small blocks inside every call (it
// copies the argument list into a map and builds an execution context: a few, under 4 KiB each,
// freed before it returns; tests/test_alloc.cpp counts and bounds them), and may take one block
// of a few tens of KiB from the C heap (lib/process/heap.h).
//
// Only in builds with oneDNN (HANDGRAD_ONEDNN); the API of its installed major version (2 or 3)
// is chosen in the .cpp by DNNL_VERSION_MAJOR.
#pragma once
#include "lib/kernels/bf16.h"

namespace hg {

// bias: null, or N floats. hg::Error if oneDNN fails.
void onednn_matmul_bf16(bool ta, bool tb, float* c, const bf16* a, const bf16* b, const float* bias, int M, int N,
                        int K, int lda, int ldb, int ldc, float alpha, float beta);

}  // namespace hg

// gemm.h — matmul.h's third backend: our own sgemm in Highway (dynamic dispatch; see simd.h),
// for the small products (a few hundred rows, K ~ 128) where a library's per-call overhead or
// its instruction set pin costs more than the arithmetic.
//
// c(M,N) = alpha · op(a)(M,K) · op(b)(K,N) + beta · c, row-major with leading dimensions, op a
// transpose when ta / tb says so (matmul.h's nt is tb, tn is ta). One thread: matmul.cpp splits
// a product over threads.
//
// How (gemm.cpp): K is cut into blocks of at most KC (fewer where a panel of b would outgrow
// 32 KB of L1), columns of c into blocks of NC, rows into blocks of MC. Each (NC, K block) block
// of op(b) is packed into panels of NR = NV vectors of columns, k-major (one panel is read
// straight through by the micro-kernel and kept in L1; the last panel only as many vectors
// wide as the columns left need). op(a) is read in place, MR rows at a time, one float per row
// and k broadcast to a vector (a transposed: the MR floats of one k lie side by side). The
// micro-kernel keeps an MR × NR tile of c in MR·NV vector registers (AVX-512: 6 × 4, 24 of its
// 32; AVX2 and SSE: 6 × 2; NEON and SVE: 8 × 3) and, per k, loads NV vectors of b and does
// MR·NV fused multiply-adds. b's panels are zero-padded past N and a tile's rows past M repeat
// its last row (a transposed: copied to a zero-padded panel, since reading on would pass the
// matrix's end), so the arithmetic has no tails; a tile that sticks out of c is stored through
// a small buffer. The packed block of op(b) is a buffer of each thread's own, grown by its first
// product (1 MiB); the rest are small arrays on the stack: a thread allocates nothing after its
// first product. NC is wide (1024 columns) so that a long product reads op(a) from memory once
// per K block, not once per 128 columns.
//
// Order of the sums: c_ij = alpha·s_1 + beta·c_ij, then c_ij = alpha·s_b + c_ij for each later
// K block b, where s_b sums a_ik·b_kj over the block's k in increasing order, one lane per
// element. No element's rounding depends on where its tile lies, so any split of c over
// threads, by rows or by columns, gives the same bits. beta = 0 never reads c.
#pragma once
#include <cstddef>

namespace hg {

void gemm(bool ta, bool tb, float* c, const float* a, const float* b, int M, int N, int K, int lda, int ldb,
          int ldc, float alpha, float beta);

// The scalar twin: the same product as plain loops in T (double in the tests).
template <class T>
void gemm_twin(bool ta, bool tb, T* c, const T* a, const T* b, int M, int N, int K, int lda, int ldb, int ldc,
               T alpha, T beta) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            T s = 0;
            for (int k = 0; k < K; k++)
                s += (ta ? a[size_t(k) * lda + i] : a[size_t(i) * lda + k]) *
                     (tb ? b[size_t(j) * ldb + k] : b[size_t(k) * ldb + j]);
            T& out = c[size_t(i) * ldc + j];
            out = beta == 0 ? alpha * s : alpha * s + beta * out;
        }
}

}  // namespace hg

// matmul.h — the one place that calls cblas_sgemm.
//
// Three products cover every matmul of a transformer, forward and backward. The names say
// which operand is transposed; all matrices are row-major with explicit leading dimensions
// (row strides), so a head's slice of a (B, T, 3C) buffer is passed without copying.
//
//   matmul_nt:  c(M,N) = alpha * a(M,K) · b(N,K)ᵀ + beta * c    (x·Wᵀ, q·kᵀ)
//   matmul_nn:  c(M,N) = alpha * a(M,K) · b(K,N)   + beta * c    (dout·W, att·v)
//   matmul_tn:  c(M,N) = alpha * a(K,M)ᵀ · b(K,N)  + beta * c    (doutᵀ·inp)
//
// Backward passes accumulate, so they call these with beta = 1.
// The *_scalar templates are the plain-loop twins, used in double by the gradient checks.
#pragma once
#include <cstddef>

namespace hg {

void matmul_nt(float* c, const float* a, const float* b, int M, int N, int K,
               int lda, int ldb, int ldc, float alpha, float beta);
void matmul_nn(float* c, const float* a, const float* b, int M, int N, int K,
               int lda, int ldb, int ldc, float alpha, float beta);
void matmul_tn(float* c, const float* a, const float* b, int M, int N, int K,
               int lda, int ldb, int ldc, float alpha, float beta);

template <typename real>
void matmul_nt_scalar(real* c, const real* a, const real* b, int M, int N, int K,
                      int lda, int ldb, int ldc, real alpha, real beta) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            real sum = 0;
            for (int k = 0; k < K; k++) sum += a[(size_t)i * lda + k] * b[(size_t)j * ldb + k];
            real& out = c[(size_t)i * ldc + j];
            out = alpha * sum + (beta == real(0) ? real(0) : beta * out);
        }
}

template <typename real>
void matmul_nn_scalar(real* c, const real* a, const real* b, int M, int N, int K,
                      int lda, int ldb, int ldc, real alpha, real beta) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            real sum = 0;
            for (int k = 0; k < K; k++) sum += a[(size_t)i * lda + k] * b[(size_t)k * ldb + j];
            real& out = c[(size_t)i * ldc + j];
            out = alpha * sum + (beta == real(0) ? real(0) : beta * out);
        }
}

template <typename real>
void matmul_tn_scalar(real* c, const real* a, const real* b, int M, int N, int K,
                      int lda, int ldb, int ldc, real alpha, real beta) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            real sum = 0;
            for (int k = 0; k < K; k++) sum += a[(size_t)k * lda + i] * b[(size_t)k * ldb + j];
            real& out = c[(size_t)i * ldc + j];
            out = alpha * sum + (beta == real(0) ? real(0) : beta * out);
        }
}

}  // namespace hg

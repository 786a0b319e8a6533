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
// beta = 0 overwrites c (an input's gradient, attention's scores); beta = 1 adds the product
// into c (a parameter's gradient, a bias copied into c first, attention's dk and dv summed over
// row blocks). The layers' scalar twins do the same math as plain loops, so these have no twin.
#pragma once

namespace hg {

void matmul_nt(float* c, const float* a, const float* b, int M, int N, int K,
               int lda, int ldb, int ldc, float alpha, float beta);
void matmul_nn(float* c, const float* a, const float* b, int M, int N, int K,
               int lda, int ldb, int ldc, float alpha, float beta);
void matmul_tn(float* c, const float* a, const float* b, int M, int N, int K,
               int lda, int ldb, int ldc, float alpha, float beta);

}  // namespace hg

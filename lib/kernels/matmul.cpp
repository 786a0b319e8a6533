// matmul.cpp — thin wrappers over OpenBLAS's cblas_sgemm (see matmul.h).
#include "lib/kernels/matmul.h"

#include <cblas.h>

namespace hg {

void matmul_nt(float* c, const float* a, const float* b, int M, int N, int K,
               int lda, int ldb, int ldc, float alpha, float beta) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
}

void matmul_nn(float* c, const float* a, const float* b, int M, int N, int K,
               int lda, int ldb, int ldc, float alpha, float beta) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
}

void matmul_tn(float* c, const float* a, const float* b, int M, int N, int K,
               int lda, int ldb, int ldc, float alpha, float beta) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace hg

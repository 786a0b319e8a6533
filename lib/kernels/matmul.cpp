// matmul.cpp — the products on OpenBLAS's cblas_sgemm or oneDNN's dnnl_sgemm (see matmul.h).
#include "lib/kernels/matmul.h"

#include <cblas.h>
#include <omp.h>

#include <atomic>
#include <mutex>

#ifdef HANDGRAD_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

#include "lib/core/errors.h"

namespace hg {

static std::atomic<MatmulBackend> g_backend{MatmulBackend::OpenBLAS};
static std::atomic<std::vector<MatmulCall>*> g_record{nullptr};
static std::mutex g_record_lock;

bool MatmulCall::same_call(const MatmulCall& o) const {
    return form == o.form && M == o.M && N == o.N && K == o.K && lda == o.lda && ldb == o.ldb && ldc == o.ldc &&
           beta == o.beta && nested == o.nested;
}

static void record(char form, int M, int N, int K, int lda, int ldb, int ldc, float beta) {
    std::lock_guard<std::mutex> hold(g_record_lock);
    std::vector<MatmulCall>* sink = g_record.load();
    if (!sink) return;
    MatmulCall c{form, M, N, K, lda, ldb, ldc, beta, omp_in_parallel() != 0, 1};
    for (MatmulCall& seen : *sink)
        if (seen.same_call(c)) return void(seen.count++);
    sink->push_back(c);
}

// c = alpha·op(a)·op(b) + beta·c, row-major; ta/tb say which operand is transposed.
static void product(char form, bool ta, bool tb, float* c, const float* a, const float* b, int M, int N, int K,
                    int lda, int ldb, int ldc, float alpha, float beta) {
    if (g_record.load(std::memory_order_relaxed)) record(form, M, N, K, lda, ldb, ldc, beta);
#ifdef HANDGRAD_ONEDNN
    if (g_backend.load(std::memory_order_relaxed) == MatmulBackend::OneDNN) {
        // dnnl_sgemm is row-major like the C BLAS interface; its status can only be a bad
        // argument, which the layers' own size checks rule out before they get here.
        dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
#endif
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, a,
                lda, b, ldb, beta, c, ldc);
}

void matmul_nt(float* c, const float* a, const float* b, int M, int N, int K,
               int lda, int ldb, int ldc, float alpha, float beta) {
    product('t', false, true, c, a, b, M, N, K, lda, ldb, ldc, alpha, beta);
}

void matmul_nn(float* c, const float* a, const float* b, int M, int N, int K,
               int lda, int ldb, int ldc, float alpha, float beta) {
    product('n', false, false, c, a, b, M, N, K, lda, ldb, ldc, alpha, beta);
}

void matmul_tn(float* c, const float* a, const float* b, int M, int N, int K,
               int lda, int ldb, int ldc, float alpha, float beta) {
    product('T', true, false, c, a, b, M, N, K, lda, ldb, ldc, alpha, beta);
}

void matmul_run(const MatmulCall& m, float* c, const float* a, const float* b) {
    product(m.form, m.form == 'T', m.form == 't', c, a, b, m.M, m.N, m.K, m.lda, m.ldb, m.ldc, 1.0f, m.beta);
}

std::string to_string(MatmulBackend b) { return b == MatmulBackend::OneDNN ? "onednn" : "openblas"; }

MatmulBackend parse_matmul_backend(const std::string& s) {
    if (s == "openblas") return MatmulBackend::OpenBLAS;
    if (s == "onednn") return MatmulBackend::OneDNN;
    throw Error(fmt::format("--matmul must be auto, openblas or onednn (got '{}')", s));
}

bool matmul_available(MatmulBackend b) {
#ifdef HANDGRAD_ONEDNN
    return true;
#else
    return b == MatmulBackend::OpenBLAS;
#endif
}

std::vector<MatmulBackend> matmul_backends() {
    std::vector<MatmulBackend> v{MatmulBackend::OpenBLAS};
    if (matmul_available(MatmulBackend::OneDNN)) v.push_back(MatmulBackend::OneDNN);
    return v;
}

void matmul_use(MatmulBackend b) {
    check(matmul_available(b), "--matmul={}: this build has no oneDNN (make deps installs libdnnl-dev; "
          "then rebuild)", to_string(b));
    g_backend = b;
}

MatmulBackend matmul_current() { return g_backend.load(); }

void matmul_record(std::vector<MatmulCall>* sink) {
    std::lock_guard<std::mutex> hold(g_record_lock);
    g_record = sink;
}

}  // namespace hg

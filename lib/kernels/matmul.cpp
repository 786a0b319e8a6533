// matmul.cpp — the products on OpenBLAS's cblas_sgemm, oneDNN's matmul primitive or our gemm (see matmul.h).
#include "lib/kernels/matmul.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "lib/core/errors.h"
#include "lib/kernels/gemm.h"
#include "lib/kernels/onednn_matmul.h"

namespace hg {

static std::atomic<MatmulBackend> g_backend{MatmulBackend::OpenBLAS};
static std::atomic<std::vector<MatmulCall>*> g_record{nullptr};
static std::atomic<bool> g_record_computes{true};
static std::mutex g_record_lock;

bool MatmulCall::same_call(const MatmulCall& o) const {
    return form == o.form && M == o.M && N == o.N && K == o.K && lda == o.lda && ldb == o.ldb && ldc == o.ldc &&
           beta == o.beta && team == o.team;
}

static void record(MatmulForm form, int M, int N, int K, int lda, int ldb, int ldc, float beta) {
    std::lock_guard<std::mutex> hold(g_record_lock);
    std::vector<MatmulCall>* sink = g_record.load();
    if (!sink) return;
    const int team = omp_in_parallel() ? omp_get_team_size(omp_get_active_level()) : 1;
    MatmulCall c{form, M, N, K, lda, ldb, ldc, beta, team, 1};
    for (MatmulCall& seen : *sink)
        if (seen.same_call(c)) return void(seen.count++);
    sink->push_back(c);
}

// A single-threaded sgemm with gemm's arguments (row-major, ta/tb transposes).
using Sgemm = void (*)(bool ta, bool tb, float* c, const float* a, const float* b, int M, int N, int K, int lda,
                       int ldb, int ldc, float alpha, float beta);

// Outside our parallel regions a product is split here, over the process's threads, into
// blocks of rows of c (or of columns, when c is wider than tall), each one single-threaded
// call. The split is fixed by the thread count, so a thread setting gives the same bits every
// time.
static void split_product(Sgemm run, bool ta, bool tb, float* c, const float* a, const float* b, int M, int N,
                          int K, int lda, int ldb, int ldc, float alpha, float beta) {
    const int threads = omp_in_parallel() ? 1 : std::min(omp_get_max_threads(), std::max(M, N) / 16);
    if (threads <= 1) return run(ta, tb, c, a, b, M, N, K, lda, ldb, ldc, alpha, beta);
    const bool by_rows = M >= N;
#pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num(), n = omp_get_num_threads(), len = by_rows ? M : N;
        const int i0 = int((long long)len * t / n), i1 = int((long long)len * (t + 1) / n);
        if (i1 > i0 && by_rows)  // rows i0..i1 of c: rows of a, or columns of a when it is transposed
            run(ta, tb, c + size_t(i0) * ldc, ta ? a + i0 : a + size_t(i0) * lda, b, i1 - i0, N, K, lda, ldb, ldc,
                alpha, beta);
        if (i1 > i0 && !by_rows)  // columns i0..i1 of c: columns of b, or rows of b when it is transposed
            run(ta, tb, c + i0, a, tb ? b + size_t(i0) * ldb : b + i0, M, i1 - i0, K, lda, ldb, ldc, alpha, beta);
    }
}

#ifdef HANDGRAD_ONEDNN
// oneDNN's matmul primitive on float inputs (onednn_matmul.h).
static void onednn_sgemm(bool ta, bool tb, float* c, const float* a, const float* b, int M, int N, int K, int lda,
                         int ldb, int ldc, float alpha, float beta) {
    if (K <= 0) return gemm(ta, tb, c, a, b, M, N, K, lda, ldb, ldc, alpha, beta);  // no terms: c = beta·c
    onednn_matmul(OneDnnInput::F32, ta, tb, c, a, b, nullptr, M, N, K, lda, ldb, ldc, alpha, beta);
}
#endif

// c = alpha·op(a)·op(b) + beta·c, row-major; ta/tb say which operand is transposed.
static void product(MatmulForm form, bool ta, bool tb, float* c, const float* a, const float* b, int M, int N, int K,
                    int lda, int ldb, int ldc, float alpha, float beta) {
    if (g_record.load(std::memory_order_relaxed)) {
        record(form, M, N, K, lda, ldb, ldc, beta);
        if (!g_record_computes.load()) return;
    }
    const MatmulBackend backend = g_backend.load(std::memory_order_relaxed);
    if (backend == MatmulBackend::Highway)
        return split_product(gemm, ta, tb, c, a, b, M, N, K, lda, ldb, ldc, alpha, beta);
#ifdef HANDGRAD_ONEDNN
    if (backend == MatmulBackend::OneDNN)
        return split_product(onednn_sgemm, ta, tb, c, a, b, M, N, K, lda, ldb, ldc, alpha, beta);
#endif
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, a,
                lda, b, ldb, beta, c, ldc);
}

const char* to_string(MatmulForm f) { return f == MatmulForm::NT ? "nt" : f == MatmulForm::TN ? "tn" : "nn"; }

void matmul_nt(Mat<float> c, Mat<const float> a, Mat<const float> b, float alpha, float beta) {
    assert(matmul_shapes_agree(MatmulForm::NT, c, a, b));
    product(MatmulForm::NT, false, true, c.data, a.data, b.data, c.rows, c.cols, a.cols, a.ld, b.ld, c.ld, alpha,
            beta);
}

void matmul_nn(Mat<float> c, Mat<const float> a, Mat<const float> b, float alpha, float beta) {
    assert(matmul_shapes_agree(MatmulForm::NN, c, a, b));
    product(MatmulForm::NN, false, false, c.data, a.data, b.data, c.rows, c.cols, a.cols, a.ld, b.ld, c.ld, alpha,
            beta);
}

void matmul_tn(Mat<float> c, Mat<const float> a, Mat<const float> b, float alpha, float beta) {
    assert(matmul_shapes_agree(MatmulForm::TN, c, a, b));
    product(MatmulForm::TN, true, false, c.data, a.data, b.data, c.rows, c.cols, a.rows, a.ld, b.ld, c.ld, alpha,
            beta);
}

void matmul_run(const MatmulCall& m, float* c, const float* a, const float* b) {
    product(m.form, m.form == MatmulForm::TN, m.form == MatmulForm::NT, c, a, b, m.M, m.N, m.K, m.lda, m.ldb, m.ldc,
            1.0f, m.beta);
}

std::string to_string(MatmulBackend b) {
    return b == MatmulBackend::OneDNN ? "onednn" : b == MatmulBackend::Highway ? "highway" : "openblas";
}

MatmulBackend parse_matmul_backend(const std::string& s) {
    if (s == "openblas") return MatmulBackend::OpenBLAS;
    if (s == "onednn") return MatmulBackend::OneDNN;
    if (s == "highway") return MatmulBackend::Highway;
    throw Error(fmt::format("--matmul must be auto, openblas, onednn or highway (got '{}')", s));
}

bool matmul_available(MatmulBackend b) {
#ifdef HANDGRAD_ONEDNN
    return true;
#else
    return b != MatmulBackend::OneDNN;
#endif
}

std::vector<MatmulBackend> matmul_backends() {
    std::vector<MatmulBackend> v{MatmulBackend::OpenBLAS};
    if (matmul_available(MatmulBackend::OneDNN)) v.push_back(MatmulBackend::OneDNN);
    v.push_back(MatmulBackend::Highway);
    return v;
}

void matmul_use(MatmulBackend b) {
    check(matmul_available(b), "--matmul={}: this build has no oneDNN (make deps installs libdnnl-dev; "
          "then rebuild)", to_string(b));
    g_backend = b;
}

MatmulBackend matmul_current() { return g_backend.load(); }

void matmul_record(std::vector<MatmulCall>* sink, bool compute) {
    std::lock_guard<std::mutex> hold(g_record_lock);
    g_record = sink;
    g_record_computes = compute || !sink;
}

}  // namespace hg

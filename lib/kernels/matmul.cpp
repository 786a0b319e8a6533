// matmul.cpp — the products on OpenBLAS's cblas_sgemm, oneDNN's dnnl_sgemm or our gemm (see matmul.h).
#include "lib/kernels/matmul.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "lib/core/errors.h"
#include "lib/core/thread_buffer.h"
#include "lib/kernels/gemm.h"
#include "lib/kernels/matmul_split.h"
#ifdef HANDGRAD_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif
#include "lib/kernels/vec.h"

namespace hg {

static std::atomic<MatmulBackend> g_backend{MatmulBackend::OpenBLAS};
static std::atomic<std::vector<MatmulCall>*> g_record{nullptr};
static std::atomic<bool> g_record_computes{true};
static std::mutex g_record_lock;

bool MatmulCall::same_but_team(const MatmulCall& o) const {
    return form == o.form && M == o.M && N == o.N && K == o.K && lda == o.lda && ldb == o.ldb && ldc == o.ldc &&
           beta == o.beta && bf16 == o.bf16;
}

bool MatmulCall::same_call(const MatmulCall& o) const { return same_but_team(o) && team == o.team; }

static void record(MatmulForm form, int M, int N, int K, int lda, int ldb, int ldc, float beta, bool bf16) {
    std::lock_guard<std::mutex> hold(g_record_lock);
    std::vector<MatmulCall>* sink = g_record.load();
    if (!sink) return;
    const int team = omp_in_parallel() ? omp_get_team_size(omp_get_active_level()) : 1;
    MatmulCall c{form, M, N, K, lda, ldb, ldc, beta, team, 1, bf16};
    for (MatmulCall& seen : *sink)
        if (seen.same_call(c)) return void(seen.count++);
    sink->push_back(c);
}

bool matmul_note_bf16(MatmulForm form, int M, int N, int K, int lda, int ldb, int ldc, float beta) {
    if (!g_record.load(std::memory_order_relaxed)) return true;
    record(form, M, N, K, lda, ldb, ldc, beta, /*bf16=*/true);
    return g_record_computes.load();
}

// A single-threaded sgemm with gemm's arguments (row-major, ta/tb transposes).
using Sgemm = void (*)(bool ta, bool tb, float* c, const float* a, const float* b, int M, int N, int K, int lda,
                       int ldb, int ldc, float alpha, float beta);

struct PartialSums;  // names this thread's buffer for split_product's partial sums (thread_buffer.h)

// Outside our parallel regions a product is split here, over the process's threads, into a
// grid of blocks of c and runs of its K terms, one single-threaded call each (the plan:
// matmul_split.h). The plan is fixed by the thread count, and each entry's partial sums are
// added in the order of their terms, so a thread setting gives the same bits every time.
static void split_product(Sgemm run, bool ta, bool tb, float* c, const float* a, const float* b, int M, int N,
                          int K, int lda, int ldb, int ldc, float alpha, float beta) {
    const MatmulSplit split = plan_matmul_split(M, N, K, omp_in_parallel() ? 1 : omp_get_max_threads());
    if (split.parts() <= 1) return run(ta, tb, c, a, b, M, N, K, lda, ldb, ldc, alpha, beta);
    // The partial sums of runs 1, 2, ... of the terms, (M, N) each (matmul_split.h bounds them).
    float* partials = thread_buffer<PartialSums>(split.scratch());
#pragma omp parallel num_threads(split.parts())
    {
#pragma omp for schedule(static, 1)
        for (int p = 0; p < split.parts(); p++) {
            const Range r = split.rows(p), n = split.cols(p), t = split.terms(p);
            // rows r of c: rows of a, or its columns when it is transposed; columns n of c: columns
            // of b, or its rows when it is transposed; terms t: columns of a and rows of b, or the
            // other way round when transposed
            const float* a_part = ta ? a + size_t(t.begin) * lda + r.begin : a + size_t(r.begin) * lda + t.begin;
            const float* b_part = tb ? b + size_t(n.begin) * ldb + t.begin : b + size_t(t.begin) * ldb + n.begin;
            if (split.k_part(p) == 0)
                run(ta, tb, c + size_t(r.begin) * ldc + n.begin, a_part, b_part, r.size(), n.size(), t.size(), lda,
                    ldb, ldc, alpha, beta);
            else
                run(ta, tb, partials + (split.k_part(p) - 1) * size_t(M) * N + size_t(r.begin) * N + n.begin,
                    a_part, b_part, r.size(), n.size(), t.size(), lda, ldb, N, alpha, 0.0f);
        }
        // the partial sums into c, each entry in the order of its runs (the barrier above first)
        if (split.k_parts > 1) {
#pragma omp for schedule(static)
            for (int i = 0; i < M; i++)
                for (int k = 1; k < split.k_parts; k++)
                    vec_acc(c + size_t(i) * ldc, partials + (k - 1) * size_t(M) * N + size_t(i) * N, size_t(N));
        }
    }
}

// OpenBLAS's sgemm: single-threaded when called inside a parallel region, as split_product does.
static void openblas_sgemm(bool ta, bool tb, float* c, const float* a, const float* b, int M, int N, int K, int lda,
                           int ldb, int ldc, float alpha, float beta) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, a,
                lda, b, ldb, beta, c, ldc);
}

#ifdef HANDGRAD_ONEDNN
// oneDNN's dnnl_sgemm, row-major like the C BLAS interface, on one thread here (split_product
// runs each part on its own thread; inside our parallel regions oneDNN does not thread). On one
// thread it ran GPT-2 small's replicas' backward products ~20 % faster than oneDNN's matmul
// primitive on float inputs (whose beta is a post-op).
static void onednn_sgemm(bool ta, bool tb, float* c, const float* a, const float* b, int M, int N, int K, int lda,
                         int ldb, int ldc, float alpha, float beta) {
    if (K <= 0) return gemm(ta, tb, c, a, b, M, N, K, lda, ldb, ldc, alpha, beta);  // no terms: c = beta·c
    const dnnl_status_t s = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
    check(s == dnnl_success, "oneDNN's sgemm failed (status {})", int(s));
}
#endif

// c = alpha·op(a)·op(b) + beta·c, row-major; ta/tb say which operand is transposed.
static void unrecorded_product(MatmulForm form, bool ta, bool tb, float* c, const float* a, const float* b, int M,
                               int N, int K, int lda, int ldb, int ldc, float alpha, float beta) {
    const MatmulBackend backend = g_backend.load(std::memory_order_relaxed);
    if (backend == MatmulBackend::Highway)
        return split_product(gemm, ta, tb, c, a, b, M, N, K, lda, ldb, ldc, alpha, beta);
#ifdef HANDGRAD_ONEDNN
    if (backend == MatmulBackend::OneDNN)
        return split_product(onednn_sgemm, ta, tb, c, a, b, M, N, K, lda, ldb, ldc, alpha, beta);
#endif
    split_product(openblas_sgemm, ta, tb, c, a, b, M, N, K, lda, ldb, ldc, alpha, beta);
}

// The same, recorded while recording is on (and then, without computing, only recorded).
static void product(MatmulForm form, bool ta, bool tb, float* c, const float* a, const float* b, int M, int N, int K,
                    int lda, int ldb, int ldc, float alpha, float beta) {
    if (g_record.load(std::memory_order_relaxed)) {
        record(form, M, N, K, lda, ldb, ldc, beta, /*bf16=*/false);
        if (!g_record_computes.load()) return;
    }
    unrecorded_product(form, ta, tb, c, a, b, M, N, K, lda, ldb, ldc, alpha, beta);
}

void matmul_widened(MatmulForm form, Mat<float> c, Mat<const float> a, Mat<const float> b, float alpha, float beta) {
    assert(matmul_shapes_agree(form, c, a, b));
    const int K = form == MatmulForm::TN ? a.rows : a.cols;
    unrecorded_product(form, form == MatmulForm::TN, form == MatmulForm::NT, c.data, a.data, b.data, c.rows, c.cols,
                       K, a.ld, b.ld, c.ld, alpha, beta);
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

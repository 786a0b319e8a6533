// Our Highway sgemm (lib/kernels/gemm.h) against its scalar twin in double, on every SIMD target:
// the three forms at the model's shapes and at awkward ones (sizes around the vector width and
// the K / row / column blocks, strides wider than the matrices, alpha ≠ 1, beta 0 over NaN,
// beta 1 and 0.5), within a derived rounding bound; the check catches a dropped tail; the bits
// repeat, and do not depend on how matmul.cpp splits c over threads.
#include "tests/catch.h"

#include <omp.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

#include "lib/core/rng.h"
#include "lib/kernels/gemm.h"
#include "lib/kernels/matmul.h"
#include "tests/layer_checks.h"

using namespace hg;
using namespace hg::test;

namespace {

struct Case {
    bool ta, tb;
    int M, N, K, lda, ldb, ldc;
    float alpha, beta;
};

struct Data {
    std::vector<float> a, b, c;  // c: the (M, ldc) buffer before the call
};

Data make(const Case& p, uint64_t seed) {
    Rng rng(seed);
    Data d;
    d.a.resize(size_t(p.ta ? p.K : p.M) * p.lda);
    d.b.resize(size_t(p.tb ? p.N : p.K) * p.ldb);
    d.c.resize(size_t(p.M) * p.ldc);
    for (float& x : d.a) x = float(rng.uniform() * 2 - 1);
    for (float& x : d.b) x = float(rng.uniform() * 2 - 1);
    for (float& x : d.c) x = p.beta == 0 ? std::numeric_limits<float>::quiet_NaN() : float(rng.uniform() * 2 - 1);
    for (int i = 0; i < p.M; i++)  // the stride between N and ldc: a value that must survive
        for (int j = p.N; j < p.ldc; j++) d.c[size_t(i) * p.ldc + j] = 7.0f;
    return d;
}

std::vector<float> run(const Case& p, const Data& d) {
    std::vector<float> c = d.c;
    gemm(p.ta, p.tb, c.data(), d.a.data(), d.b.data(), p.M, p.N, p.K, p.lda, p.ldb, p.ldc, p.alpha, p.beta);
    return c;
}

// The worst error against the twin in double, in units of the bound
//   |c - ĉ| ≤ (K + 3)·u·(|alpha|·Σ_k |a_ik·b_kj| + |beta·c_ij|),  u = 2⁻²⁴:
// K fused multiply-adds (or K products and K sums) each round once by at most u relative to a
// partial sum bounded by Σ|a·b|; alpha's product, beta's product and their sum add three more.
// ≤ 1 passes. NaN when an entry between N and ldc changed, or any entry is not finite.
double error_in_bounds(const Case& p, const Data& d, const std::vector<float>& got) {
    std::vector<double> a(d.a.begin(), d.a.end()), b(d.b.begin(), d.b.end()), c(d.c.begin(), d.c.end());
    std::vector<double> absa(a.size()), absb(b.size()), scale(c.size(), 0.0);
    for (size_t i = 0; i < a.size(); i++) absa[i] = std::fabs(a[i]);
    for (size_t i = 0; i < b.size(); i++) absb[i] = std::fabs(b[i]);
    gemm_twin<double>(p.ta, p.tb, c.data(), a.data(), b.data(), p.M, p.N, p.K, p.lda, p.ldb, p.ldc, p.alpha,
                      p.beta);
    gemm_twin<double>(p.ta, p.tb, scale.data(), absa.data(), absb.data(), p.M, p.N, p.K, p.lda, p.ldb, p.ldc,
                      std::fabs(p.alpha), 0.0);
    const double u = std::ldexp(1.0, -24);
    double worst = 0;
    for (int i = 0; i < p.M; i++) {
        for (int j = 0; j < p.N; j++) {
            const size_t at = size_t(i) * p.ldc + j;
            const double bound = (p.K + 3) * u * (scale[at] + (p.beta == 0 ? 0 : std::fabs(p.beta * d.c[at])));
            const double e = std::fabs(double(got[at]) - c[at]);
            if (!std::isfinite(got[at])) return std::numeric_limits<double>::quiet_NaN();
            worst = std::max(worst, e / (bound + 1e-300));
        }
        for (int j = p.N; j < p.ldc; j++)
            if (got[size_t(i) * p.ldc + j] != 7.0f) return std::numeric_limits<double>::quiet_NaN();
    }
    return worst;
}

std::vector<Case> cases() {
    std::vector<Case> v;
    const float alphas[] = {1.0f, 0.75f}, betas[] = {0.0f, 1.0f, 0.5f};
    int n = 0;
    const auto add = [&](int M, int N, int K, int pad) {
        for (int form = 0; form < 3; form++) {
            const bool ta = form == 2, tb = form == 1;  // nn, nt, tn
            const float alpha = alphas[n % 2], beta = betas[n % 3];
            n++;
            v.push_back(Case{ta, tb, M, N, K, (ta ? M : K) + pad, (tb ? K : N) + pad, N + pad, alpha, beta});
        }
    };
    // The course model's products at 384 rows (x·Wᵀ, dx, dW with K = 384, the 65-wide head).
    for (auto [M, N, K] : {std::array{384, 384, 128}, {384, 128, 128}, {384, 512, 128}, {384, 128, 512},
                          {384, 65, 128}, {128, 384, 384}})
        add(M, N, K, 0);
    const int sizes[] = {1, 7, 17, 33, 65, 127};
    for (int M : sizes)
        for (int N : sizes) add(M, N, sizes[(M + N) % 6], (M + N) % 3 == 0 ? 0 : 5);
    // Past one K block (256), one row block (96) and one column block (128), and K = 1.
    add(100, 130, 300, 3), add(97, 300, 513, 0), add(200, 33, 257, 11), add(9, 140, 1, 2);
    return v;
}

}  // namespace

TEST_CASE("gemm: every form within its rounding bound of the twin in double, on every target", "[gemm]") {
    const std::vector<Case> all = cases();
    for_each_target([&](const std::string& target) {
        double worst = 0;
        for (size_t i = 0; i < all.size(); i++) {
            const Case& p = all[i];
            INFO(target << (p.ta ? " tn" : p.tb ? " nt" : " nn") << " M " << p.M << " N " << p.N << " K " << p.K
                        << " ld " << p.lda << "/" << p.ldb << "/" << p.ldc << " alpha " << p.alpha << " beta "
                        << p.beta);
            const Data d = make(p, 100 + i);
            const double e = error_in_bounds(p, d, run(p, d));
            CHECK(e <= 1.0);  // NaN: a write into the stride, or NaN leaking from c with beta 0
            worst = std::max(worst, e);
        }
        INFO(target << ": worst error " << worst << " of the bound over " << all.size() << " products");
        CHECK(worst <= 1.0);
    });
}

TEST_CASE("gemm: the check catches a dropped column tail, a dropped row tail and a write into the stride",
          "[gemm]") {
    const Case p{false, true, 17, 33, 65, 70, 65, 40, 1.0f, 1.0f};
    const Data d = make(p, 9);
    const std::vector<float> good = run(p, d);
    REQUIRE(error_in_bounds(p, d, good) <= 1.0);
    std::vector<float> no_column = good, no_row = good, stride = good;
    for (int i = 0; i < p.M; i++) no_column[size_t(i) * p.ldc + p.N - 1] = d.c[size_t(i) * p.ldc + p.N - 1];
    for (int j = 0; j < p.N; j++) no_row[size_t(p.M - 1) * p.ldc + j] = d.c[size_t(p.M - 1) * p.ldc + j];
    stride[p.N] = 0;
    CHECK(error_in_bounds(p, d, no_column) > 1.0);
    CHECK(error_in_bounds(p, d, no_row) > 1.0);
    CHECK(std::isnan(error_in_bounds(p, d, stride)));
}

TEST_CASE("gemm through matmul: the same bits twice and on 1, 2 and 3 threads, every form", "[gemm][matmul]") {
    const MatmulBackend before = matmul_current();
    matmul_use(MatmulBackend::Highway);
    const int threads_before = omp_get_max_threads();
    using F = MatmulForm;
    for (auto [form, M, N, K] : {std::tuple{F::NT, 384, 65, 128}, {F::NN, 70, 384, 128}, {F::TN, 128, 384, 300}}) {
        const MatmulCall m{form, M, N, K, form == F::TN ? M : K, form == F::NT ? K : N, N, 1.0f, 1, 1};
        const Case p{form == F::TN, form == F::NT, M, N, K, m.lda, m.ldb, m.ldc, 1.0f, 1.0f};
        const Data d = make(p, 4);
        std::vector<std::vector<float>> got;
        for (int threads : {1, 1, 2, 3}) {
            omp_set_num_threads(threads);
            std::vector<float> c = d.c;
            matmul_run(m, c.data(), d.a.data(), d.b.data());
            got.push_back(c);
        }
        INFO("form " << to_string(form) << " M " << M << " N " << N << " K " << K);
        CHECK(error_in_bounds(p, d, got[0]) <= 1.0);
        for (size_t i = 1; i < got.size(); i++)
            CHECK(std::memcmp(got[i].data(), got[0].data(), got[0].size() * sizeof(float)) == 0);
    }
    omp_set_num_threads(threads_before);
    matmul_use(before);
}

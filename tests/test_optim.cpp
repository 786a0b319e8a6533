// test_optim.cpp — AdamW against hand arithmetic, the Highway kernel against its scalar twin,
// gradient norm and clipping.
#include "tests/catch.h"
#include <cmath>
#include <cstring>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "lib/core/errors.h"
#include "lib/core/rng.h"
#include "lib/kernels/adamw.h"
#include "lib/kernels/simd.h"
#include "lib/optim/adamw.h"
#include "tests/gradcheck.h"

using Catch::Matchers::Contains;
using namespace hg;

namespace {

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Runs f with n OpenMP threads, then restores the previous count.
template <typename F>
void with_threads(int n, F f) {
#ifdef _OPENMP
    int before = omp_get_max_threads();
    omp_set_num_threads(n);
    f();
    omp_set_num_threads(before);
#else
    (void)n;
    f();
#endif
}

}  // namespace

// Two tensors in one arena: a 3-element weight that decays, then a 2-element bias that doesn't.
TEST_CASE("adamw_step: one step, by hand", "[optim]") {
    std::vector<float> p = {0.5f, -1.0f, 2.0f, 0.3f, -0.7f};
    std::vector<float> g = {0.1f, -0.2f, 0.05f, 1.0f, -0.5f};
    std::vector<float> m(5, 0.0f), v(5, 0.0f);
    const std::vector<ParamSpan> spans = {{0, 3, true}, {3, 2, false}};
    const float lr = 0.01f;
    AdamWConfig cfg;  // β1 0.9, β2 0.95, eps 1e-8, wd 0.1
    adamw_step(p.data(), g.data(), m.data(), v.data(), spans, lr, cfg, 1);

    // Step 1 from m = v = 0:
    //   m = (1 − 0.9)·g = 0.1·g,  v = (1 − 0.95)·g² = 0.05·g²
    //   bc1 = 1 − 0.9 = 0.1,  bc2 = 1 − 0.95 = 0.05
    //   m / bc1 = g,  sqrt(v) / sqrt(bc2) = |g|:  the first step is lr · g / (|g| + eps) ≈ ±lr
    //   decaying:  p ← p · (1 − 0.01·0.1) − 0.01 · g / (|g| + 1e-8)
    //   no decay:  p ← p − 0.01 · g / (|g| + 1e-8)
    const double expected_p[5] = {
        0.5 * 0.999 - 0.01 * 0.1 / (0.1 + 1e-8),     //  0.48950000010
        -1.0 * 0.999 + 0.01 * 0.2 / (0.2 + 1e-8),    // -0.98899999995
        2.0 * 0.999 - 0.01 * 0.05 / (0.05 + 1e-8),   //  1.98800000020
        0.3 - 0.01 * 1.0 / (1.0 + 1e-8),             //  0.29000000001
        -0.7 + 0.01 * 0.5 / (0.5 + 1e-8),            // -0.68999999998
    };
    const double g_d[5] = {0.1, -0.2, 0.05, 1.0, -0.5};
    for (int i = 0; i < 5; i++) {
        INFO("element " << i);
        // float inputs and float β's (0.9f is 0.9 − 2.4e-8): agreement to float precision
        CHECK(p[i] == Approx(expected_p[i]).epsilon(1e-6));
        CHECK(m[i] == Approx(0.1 * g_d[i]).epsilon(1e-6));
        CHECK(v[i] == Approx(0.05 * g_d[i] * g_d[i]).epsilon(1e-6));
    }
    // A wrong rule would be caught: without the decay, element 0 would be 0.49000000010,
    // 1e-3 away; with decay on the bias, element 3 would be 0.2897, 3e-4 away.
    CHECK(std::fabs(p[0] - 0.49) > 1e-4);
    CHECK(std::fabs(p[3] - (0.3 * 0.999 - 0.01)) > 1e-4);
}

TEST_CASE("adamw_step: two steps, bias correction", "[optim]") {
    std::vector<float> p = {0.5f, -1.0f, 2.0f, 0.3f, -0.7f};
    const std::vector<float> g1 = {0.1f, -0.2f, 0.05f, 1.0f, -0.5f};
    const std::vector<float> g2 = {-0.3f, -0.1f, 0.4f, 0.5f, 0.0f};
    std::vector<float> m(5, 0.0f), v(5, 0.0f);
    const std::vector<ParamSpan> spans = {{0, 3, true}, {3, 2, false}};
    AdamWConfig cfg;
    adamw_step(p.data(), g1.data(), m.data(), v.data(), spans, 0.01f, cfg, 1);
    adamw_step(p.data(), g2.data(), m.data(), v.data(), spans, 0.02f, cfg, 2);  // a new lr, as a schedule would

    // By hand, in double, element by element:
    //   step 1: p1 = p0·(1 − 0.01·wd) − 0.01·g1/(|g1| + eps),  m1 = 0.1·g1,  v1 = 0.05·g1²
    //   step 2: m2 = 0.9·m1 + 0.1·g2,  v2 = 0.95·v1 + 0.05·g2²
    //           bc1 = 1 − 0.9² = 0.19,  bc2 = 1 − 0.95² = 0.0975
    //           p2 = p1·(1 − 0.02·wd) − (0.02 / 0.19) · m2 / (sqrt(v2)/sqrt(0.0975) + eps)
    const double p0[5] = {0.5, -1.0, 2.0, 0.3, -0.7};
    const double a[5] = {0.1, -0.2, 0.05, 1.0, -0.5};
    const double b[5] = {-0.3, -0.1, 0.4, 0.5, 0.0};
    double p_no_bc[5];
    for (int i = 0; i < 5; i++) {
        const double wd = i < 3 ? 0.1 : 0.0;
        const double p1 = p0[i] * (1 - 0.01 * wd) - 0.01 * a[i] / (std::fabs(a[i]) + 1e-8);
        const double m1 = 0.1 * a[i], v1 = 0.05 * a[i] * a[i];
        const double m2 = 0.9 * m1 + 0.1 * b[i], v2 = 0.95 * v1 + 0.05 * b[i] * b[i];
        const double p2 = p1 * (1 - 0.02 * wd) - (0.02 / 0.19) * m2 / (std::sqrt(v2) / std::sqrt(0.0975) + 1e-8);
        p_no_bc[i] = p1 * (1 - 0.02 * wd) - 0.02 * m2 / (std::sqrt(v2) + 1e-8);
        INFO("element " << i);
        CHECK(p[i] == Approx(p2).epsilon(2e-6));
        CHECK(m[i] == Approx(m2).epsilon(2e-6));
        CHECK(v[i] == Approx(v2).epsilon(2e-6));
    }
    // Forgetting the bias correction would be caught (the steps differ by ~40 %).
    CHECK(std::fabs(p[0] - p_no_bc[0]) > 1e-3);
    // Element 4 had g2 = 0 but moves anyway: the momentum of step 1 carries it on.
    CHECK(p[4] > -0.69f);

    REQUIRE_THROWS_WITH(adamw_step(p.data(), g2.data(), m.data(), v.data(), spans, 0.01f, cfg, 0),
                        Contains("1-based, got 0"));
}

TEST_CASE("adamw_step: decay never touches spans with decays = false", "[optim]") {
    // Zero gradients and zero moments: the Adam part moves nothing (0 / (0 + eps) = 0), so
    // what remains is the decay alone: p·(1 − lr·wd) on decaying spans, p exactly elsewhere.
    // The spans leave gaps ([2, 4) and [9, 10)) that nothing may touch.
    const size_t P = 10;
    std::vector<float> p0 = test::randn<float>(P, 11);
    std::vector<float> p = p0, g(P, 0.0f), m(P, 0.0f), v(P, 0.0f);
    const std::vector<ParamSpan> spans = {{0, 2, false}, {4, 3, true}, {7, 2, false}};
    AdamWConfig cfg;
    cfg.weight_decay = 0.5f;
    adamw_step(p.data(), g.data(), m.data(), v.data(), spans, 0.1f, cfg, 3);
    const float decay = float(1.0 - 0.1 * 0.5);
    for (size_t i = 0; i < P; i++) {
        INFO("element " << i);
        if (i >= 4 && i < 7) CHECK(p[i] == p0[i] * decay);
        else CHECK(p[i] == p0[i]);  // bitwise: multiplied by exactly 1, or not at all
        CHECK(m[i] == 0.0f);
        CHECK(v[i] == 0.0f);
    }
}

TEST_CASE("adamw_update: Highway kernel equals the scalar twin bit for bit on every target",
          "[optim][simd]") {
    const float lr = 3e-3f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, wd = 0.1f;
    const int step = 7;
    const float bc1 = float(1.0 - std::pow(0.9f, step)), bc2 = float(1.0 - std::pow(0.95f, step));
    const auto targets = simd_targets();
    REQUIRE(!targets.empty());
    for (const SimdTarget& target : targets) {
        simd_force_target(target.bits);
        for (size_t n : {1, 5, 7, 33, 127, 1000})
          for (float gs : {1.0f, 0.37f}) {  // grad_scale: none, and a clipping factor
            INFO("target " << target.name << ", n " << n << ", grad_scale " << gs);
            const std::vector<float> g = test::randn<float>(n, 100 + n, 0.1);
            std::vector<float> p = test::randn<float>(n, 200 + n), m = test::randn<float>(n, 300 + n, 0.01);
            std::vector<float> v = test::randn<float>(n, 400 + n, 0.01);
            for (float& x : v) x = x * x;  // v >= 0, and sometimes tiny (eps matters)
            std::vector<float> p_ref = p, m_ref = m, v_ref = v;
            std::vector<double> p_d(p.begin(), p.end()), m_d(m.begin(), m.end()), v_d(v.begin(), v.end());
            const std::vector<double> g_d(g.begin(), g.end());

            // with the bf16 copy written in the same pass (the kernel's and the twin's must agree too)
            std::vector<bf16> p16(n), p16_ref(n);
            adamw_update(p.data(), g.data(), m.data(), v.data(), n, lr, beta1, beta2, eps, wd, bc1, bc2, gs,
                         p16.data());
            adamw_update_scalar<float>(p_ref.data(), g.data(), m_ref.data(), v_ref.data(), n, lr,
                                       beta1, beta2, eps, wd, bc1, bc2, gs, p16_ref.data());
            CHECK(bit_equal(p, p_ref));
            CHECK(p16 == p16_ref);
            for (size_t i = 0; i < n; i++) CHECK(p16[i] == bf16_from_float(p[i]));
            CHECK(bit_equal(m, m_ref));
            CHECK(bit_equal(v, v_ref));

            // And the float arithmetic agrees with the same rule in double.
            adamw_update_scalar<double>(p_d.data(), g_d.data(), m_d.data(), v_d.data(), n, lr, beta1,
                                        beta2, eps, wd, bc1, bc2, double(gs));
            double worst = 0;
            for (size_t i = 0; i < n; i++)
                worst = std::max(worst, std::fabs(p[i] - p_d[i]) / (1e-7 + 1e-6 * std::fabs(p_d[i])));
            CHECK(worst <= 1.0);
        }
    }
    simd_force_target(0);
}

TEST_CASE("adamw_step: chunked and threaded, equals the scalar twin span by span", "[optim]") {
    // One span over several 16K chunks with a ragged end, small spans around it.
    const std::vector<ParamSpan> spans = {{0, 5, false}, {5, 40000, true}, {40005, 33, true}, {40038, 7, false}};
    const size_t P = 40045;
    const std::vector<float> g = test::randn<float>(P, 1, 0.01);
    const std::vector<float> p0 = test::randn<float>(P, 2, 0.02);
    AdamWConfig cfg;
    // The reference: the scalar twin, one span at a time, three steps.
    std::vector<float> p_ref = p0, m_ref(P, 0.0f), v_ref(P, 0.0f);
    for (int step = 1; step <= 3; step++) {
        const float bc1 = float(1.0 - std::pow(double(cfg.beta1), step));
        const float bc2 = float(1.0 - std::pow(double(cfg.beta2), step));
        for (const ParamSpan& s : spans)
            adamw_update_scalar<float>(p_ref.data() + s.offset, g.data() + s.offset, m_ref.data() + s.offset,
                                       v_ref.data() + s.offset, s.size, 6e-4f, cfg.beta1, cfg.beta2,
                                       cfg.eps, s.decays ? cfg.weight_decay : 0.0f, bc1, bc2, 1.0f);
    }
    for (int threads : {1, 2}) {
        with_threads(threads, [&] {
            std::vector<float> p = p0, m(P, 0.0f), v(P, 0.0f);
            for (int step = 1; step <= 3; step++)
                adamw_step(p.data(), g.data(), m.data(), v.data(), spans, 6e-4f, cfg, step);
            INFO(threads << " threads");
            CHECK(bit_equal(p, p_ref));
            CHECK(bit_equal(m, m_ref));
            CHECK(bit_equal(v, v_ref));
        });
    }
}

TEST_CASE("grad_global_norm and clip_grad_norm", "[optim]") {
    std::vector<float> g = {3.0f, -4.0f};  // sqrt(9 + 16) = 5
    CHECK(grad_global_norm(g.data(), g.size()) == 5.0);
    std::vector<float> h = {1.0f, 2.0f, -2.0f, 0.0f};  // sqrt(1 + 4 + 4) = 3
    CHECK(grad_global_norm(h.data(), h.size()) == 3.0);
    CHECK(grad_global_norm(h.data(), 0) == 0.0);

    SECTION("over max_norm: scaled to max_norm, direction kept") {
        std::vector<float> c = g;
        CHECK(clip_grad_norm(c.data(), c.size(), 1.0) == 5.0);  // the norm before clipping
        const double after = grad_global_norm(c.data(), c.size());
        CHECK(std::fabs(after - 1.0) <= 1e-6);
        CHECK(c[0] == float(3.0f * float(1.0 / (5.0 + 1e-6))));  // PyTorch's coefficient
        CHECK(c[1] / c[0] == Approx(-4.0 / 3.0).epsilon(1e-7));
    }
    SECTION("under max_norm, or max_norm 0: untouched") {
        std::vector<float> c = g;
        CHECK(clip_grad_norm(c.data(), c.size(), 10.0) == 5.0);
        CHECK(bit_equal(c, g));
        CHECK(clip_grad_norm(c.data(), c.size(), 0.0) == 5.0);
        CHECK(bit_equal(c, g));
        CHECK(clip_grad_norm(c.data(), c.size(), -1.0) == 5.0);
        CHECK(bit_equal(c, g));
    }
    SECTION("large random gradient, clipped in chunks") {
        std::vector<float> big = test::randn<float>(100003, 5, 0.1);
        double reference = 0;  // plain sequential sum in double
        for (float x : big) reference += double(x) * double(x);
        reference = std::sqrt(reference);
        const double norm = grad_global_norm(big.data(), big.size());
        CHECK(norm == Approx(reference).epsilon(1e-12));
        REQUIRE(norm > 10.0);  // ~ 0.1 · sqrt(100003) ≈ 31.6
        CHECK(clip_grad_norm(big.data(), big.size(), 2.5) == norm);
        CHECK(grad_global_norm(big.data(), big.size()) == Approx(2.5).epsilon(1e-6));
    }
    SECTION("the same bits on any number of threads, and with a ragged end") {
        for (size_t n : {size_t(7), size_t(16384 * 5 + 3), size_t(16384 * 300 + 11)}) {
            const std::vector<float> x = test::randn<float>(n, 8, 0.5);
            double reference = 0;
            for (float v : x) reference += double(v) * double(v);
            std::vector<double> norms;
            for (int threads : {1, 2, 3}) with_threads(threads, [&] { norms.push_back(grad_global_norm(x.data(), n)); });
            CAPTURE(n);
            CHECK(norms[0] == Approx(std::sqrt(reference)).epsilon(1e-12));
            CHECK(norms[1] == norms[0]);
            CHECK(norms[2] == norms[0]);
        }
    }
}

TEST_CASE("clipping fused into AdamW's pass: the bits of clipping the gradient first", "[optim]") {
    const std::vector<ParamSpan> spans = {{0, 5, false}, {5, 40000, true}, {40005, 33, true}};
    const size_t P = 40038;
    const std::vector<float> g0 = test::randn<float>(P, 11, 0.05);  // norm ≈ 10: clipped at 1
    const std::vector<float> p0 = test::randn<float>(P, 12, 0.02);
    const AdamWConfig cfg;
    const double norm = grad_global_norm(g0.data(), P);
    REQUIRE(norm > 1.0);
    CHECK(clip_scale(norm, 1.0) == float(1.0 / (norm + 1e-6)));
    CHECK(clip_scale(norm, 2 * norm) == 1.0f);  // under max_norm: exactly 1
    CHECK(clip_scale(norm, 0.0) == 1.0f);       // clipping off
    // Two steps each way, the second with a fresh gradient (m, v carry the first's scale).
    std::vector<float> p_two = p0, m_two(P, 0.0f), v_two(P, 0.0f);  // clip in place, then AdamW
    std::vector<float> p_one = p0, m_one(P, 0.0f), v_one(P, 0.0f);  // one pass
    for (int step = 1; step <= 2; step++) {
        const std::vector<float> g = step == 1 ? g0 : test::randn<float>(P, 13, 0.05);
        std::vector<float> clipped = g;
        const double n_two = clip_grad_norm(clipped.data(), P, 1.0);
        adamw_step(p_two.data(), clipped.data(), m_two.data(), v_two.data(), spans, 1e-3f, cfg, step);
        const double n_one = grad_global_norm(g.data(), P);
        adamw_step(p_one.data(), g.data(), m_one.data(), v_one.data(), spans, 1e-3f, cfg, step,
                   clip_scale(n_one, 1.0));
        CHECK(n_one == n_two);
    }
    CHECK(bit_equal(p_one, p_two));
    CHECK(bit_equal(m_one, m_two));
    CHECK(bit_equal(v_one, v_two));
    // The factor is really applied: the first moment after one unclipped step differs.
    std::vector<float> p_raw = p0, m_raw(P, 0.0f), v_raw(P, 0.0f);
    adamw_step(p_raw.data(), g0.data(), m_raw.data(), v_raw.data(), spans, 1e-3f, cfg, 1);
    std::vector<float> p_cl = p0, m_cl(P, 0.0f), v_cl(P, 0.0f);
    adamw_step(p_cl.data(), g0.data(), m_cl.data(), v_cl.data(), spans, 1e-3f, cfg, 1, clip_scale(norm, 1.0));
    CHECK(m_cl[7] == float(1.0 - double(cfg.beta1)) * (g0[7] * clip_scale(norm, 1.0)));  // m = (1 − β1)·g·s
    CHECK(!bit_equal(m_cl, m_raw));
}

TEST_CASE("grad_global_norm does not depend on the thread count", "[optim]") {
    for (size_t n : {size_t(1000), size_t(1) << 20, size_t(5000011)}) {
        const std::vector<float> g = test::randn<float>(n, 42 + n, 1e-2);
        double one = 0, two = 0, three = 0;
        with_threads(1, [&] { one = grad_global_norm(g.data(), n); });
        with_threads(2, [&] { two = grad_global_norm(g.data(), n); });
        with_threads(3, [&] { three = grad_global_norm(g.data(), n); });
        INFO("n " << n);
        CHECK(std::memcmp(&one, &two, sizeof one) == 0);
        CHECK(std::memcmp(&one, &three, sizeof one) == 0);
        CHECK(one > 0);
    }
}

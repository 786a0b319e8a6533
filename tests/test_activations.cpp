// test_activations.cpp — SwiGLU's gate h = silu(a) ⊙ b, the squared ReLU, and logit soft-capping:
//   [gradcheck]  every input gradient against central differences, in double on the scalar
//                twins, tiny odd sizes, input scales 0.1 to 100; planted wrong derivatives the
//                same checks must reject
//   [simd]       the Highway kernels against the float twin on every SIMD target, lengths
//                1 .. 1000 (every tail through the padded buffer); against the double twin on
//                long arrays; the same bits with 1, 2 and 3 threads; extreme inputs stay finite
//   contract     every backward writes (=) its input gradient; the in-place forms give the same
//                bits; bad sizes and caps are hg::Error; swiglu_hidden by hand
//
// Tolerances, in ulps (eps = FLT_EPSILON) of each element's natural scale, with the worst
// measured on this machine (AVX3, AVX2, SSE4, SSSE3, SCALAR targets) when they were set:
//   SwiGLU  out  |ref|                                   <= 4   measured 2.48 (2.29 vs double)
//           da   |dout·b|·σ(a)·(1 + |a|·(1 - σ(a)))      <= 4   measured 2.80 (2.40 vs double)
//           db   |dout·a·σ(a)|                           <= 4   measured 2.52 (2.15 vs double)
//     (σ through one exponential of lib/kernels/exp-inl.h and one divide, against std::exp)
//   ReLU²   bit-identical to the float twin (a max and exact-order products); within half an
//           ulp (one rounding) of the double twin
//   softcap out  |ref|                                   <= 6   measured 2.33 (2.12 vs double)
//           dz   |dout|  vs the float twin               <= 2   measured 0.96 (1 - t² fused or not)
//                        vs the double twin              <= 6   measured 2.42 (the float
//                                                               output's own error in t²)
#include "tests/catch.h"

#include <cfloat>
#include <cmath>
#include <vector>

#include "lib/core/errors.h"
#include "lib/layers/relu2.h"
#include "lib/layers/softcap.h"
#include "lib/layers/swiglu.h"
#include "tests/gradcheck.h"
#include "tests/layer_checks.h"

using namespace hg;
using namespace hg::test;
using Vec = std::vector<double>;
using Floats = std::vector<float>;

namespace {

constexpr double kEps = FLT_EPSILON;
constexpr double kSwigluUlps = 4, kSoftcapFwdUlps = 6, kSoftcapBwdUlps = 2, kSoftcapBwdVsDouble = 6;
const size_t kLengths[] = {1, 5, 7, 33, 127, 1000};

// max_i |got_i - want_i| / (eps · scale_i): the error in ulps of each element's scale.
template <class T>
double ulps(const Floats& got, const std::vector<T>& want, const Vec& scale) {
    REQUIRE(got.size() == want.size());
    double worst = 0;
    for (size_t i = 0; i < got.size(); i++) {
        const double u = std::fabs(double(got[i]) - double(want[i])) / (kEps * scale[i] + 1e-37);
        if (!(u <= worst)) worst = u;
    }
    return worst;
}

double sigma(double a) { return 1 / (1 + std::exp(-a)); }

// SwiGLU's natural scales (see the top), per element of out (N, H) and of dinp (N, 2H).
Vec swiglu_out_scale(const Floats& inp, int N, int H) {
    Vec s(size_t(N) * H);
    for (int n = 0; n < N; n++)
        for (int i = 0; i < H; i++) {
            const double a = inp[size_t(n) * 2 * H + i], b = inp[size_t(n) * 2 * H + H + i];
            s[size_t(n) * H + i] = std::fabs(a * sigma(a) * b);
        }
    return s;
}
Vec swiglu_dinp_scale(const Floats& inp, const Floats& dout, int N, int H) {
    Vec s(size_t(N) * 2 * H);
    for (int n = 0; n < N; n++)
        for (int i = 0; i < H; i++) {
            const size_t at = size_t(n) * 2 * H + i;
            const double a = inp[at], b = inp[at + H], dh = dout[size_t(n) * H + i];
            s[at] = std::fabs(dh * b) * sigma(a) * (1 + std::fabs(a) * sigma(-a));
            s[at + H] = std::fabs(dh * a * sigma(a));
        }
    return s;
}
template <class T>
Vec abs_of(const std::vector<T>& v) {
    Vec s(v.size());
    for (size_t i = 0; i < v.size(); i++) s[i] = std::fabs(double(v[i]));
    return s;
}
// The first half of each (N, 2H) row's error (da) and the second (db), separately.
template <class T>
std::pair<double, double> split_ulps(const Floats& got, const std::vector<T>& want,
                                     const Vec& scale, int N, int H) {
    Floats ga, gb;
    std::vector<T> wa, wb;
    Vec sa, sb;
    for (int n = 0; n < N; n++)
        for (int i = 0; i < 2 * H; i++) {
            const size_t at = size_t(n) * 2 * H + i;
            (i < H ? ga : gb).push_back(got[at]);
            (i < H ? wa : wb).push_back(want[at]);
            (i < H ? sa : sb).push_back(scale[at]);
        }
    return {ulps(ga, wa, sa), ulps(gb, wb, sb)};
}

}  // namespace

// ---- SwiGLU ---------------------------------------------------------------------------------

TEST_CASE("swiglu_hidden: ⌈8C/3⌉ rounded up to a multiple of 32", "[layers][swiglu]") {
    CHECK(swiglu_hidden(128) == 352);   // 341.3 → 342 → 352
    CHECK(swiglu_hidden(384) == 1024);  // 8·384/3 = 1024 exactly
    CHECK(swiglu_hidden(768) == 2048);
    CHECK(swiglu_hidden(64) == 192);    // 170.7 → 171 → 192
    CHECK(swiglu_hidden(12) == 32);     // 32 exactly
    CHECK(swiglu_hidden(13) == 64);     // 34.7 → 35 → 64
    CHECK(swiglu_hidden(1) == 32);
    CHECK(3 * 128 * swiglu_hidden(128) == 135168);
    CHECK_THROWS_AS(swiglu_hidden(0), hg::Error);
}

TEST_CASE("SwiGLU backward matches finite differences (da and db)", "[gradcheck][layers][swiglu]") {
    for (int H : {5, 7})
        for (double scale : {0.1, 1.0, 10.0}) {
            CAPTURE(H, scale);
            const int N = 3;
            Vec inp = randn(size_t(N) * 2 * H, 900 + H, scale), r = randn(size_t(N) * H, 901 + H);
            Vec out(r.size()), dinp(inp.size());
            swiglu_backward_twin(dinp.data(), inp.data(), r.data(), N, H);
            check_grad("swiglu dinp", inp, dinp, [&] {
                swiglu_forward_twin(out.data(), inp.data(), N, H);
                return dot(r, out.data());
            }, scale);
        }
}

TEST_CASE("SwiGLU: the checker rejects silu' = σ (a term missing) and db with σ(a) for silu(a)",
          "[gradcheck][layers][swiglu]") {
    const int N = 3, H = 5;
    Vec inp = randn(size_t(N) * 2 * H, 910, 2.0), r = randn(size_t(N) * H, 911), out(r.size());
    auto loss = [&] {
        swiglu_forward_twin(out.data(), inp.data(), N, H);
        return dot(r, out.data());
    };
    Vec no_term(inp.size()), sigma_for_silu(inp.size());
    swiglu_backward_twin(no_term.data(), inp.data(), r.data(), N, H);
    sigma_for_silu = no_term;
    for (int n = 0; n < N; n++)
        for (int i = 0; i < H; i++) {
            const size_t at = size_t(n) * 2 * H + i;
            const double a = inp[at], b = inp[at + H], dh = r[size_t(n) * H + i];
            no_term[at] = dh * b * sigma(a);
            sigma_for_silu[at + H] = dh * sigma(a);
        }
    check_grad_fails("silu' = sigma", inp, no_term, loss);
    check_grad_fails("db = dout sigma(a)", inp, sigma_for_silu, loss);
}

TEST_CASE("SwiGLU kernels match the float twin on every SIMD target", "[simd][layers][swiglu]") {
    for_each_target([&] {
        for (size_t H_ : kLengths)
            for (double scale : {1.0, 10.0}) {
                const int N = 3, H = int(H_);
                CAPTURE(H, scale);
                const Floats inp = randn<float>(size_t(N) * 2 * H, 920 + H, scale),
                             dout = randn<float>(size_t(N) * H, 921 + H);
                Floats out(dout.size()), ref(dout.size()), dinp(inp.size()), rdinp(inp.size());
                swiglu_forward(out.data(), inp.data(), N, H);
                swiglu_forward_twin(ref.data(), inp.data(), N, H);
                swiglu_backward(dinp.data(), inp.data(), dout.data(), N, H);
                swiglu_backward_twin(rdinp.data(), inp.data(), dout.data(), N, H);
                const double fwd = ulps(out, ref, swiglu_out_scale(inp, N, H));
                const Vec scale_d = swiglu_dinp_scale(inp, dout, N, H);
                const auto [da, db] = split_ulps(dinp, rdinp, scale_d, N, H);
                INFO("ulps: out " << fwd << " da " << da << " db " << db);
                CHECK(fwd <= kSwigluUlps);
                CHECK(da <= kSwigluUlps);
                CHECK(db <= kSwigluUlps);
            }
    });
}

// ---- ReLU² ----------------------------------------------------------------------------------

TEST_CASE("ReLU² backward matches finite differences", "[gradcheck][layers][relu2]") {
    for (size_t n : {15, 31})
        for (double scale : {0.1, 1.0, 10.0}) {
            CAPTURE(n, scale);
            Vec x = randn(n, 930 + n, scale), r = randn(n, 931 + n), out(n), dinp(n);
            relu2_backward_twin(dinp.data(), x.data(), r.data(), n);
            check_grad("relu2 dinp", x, dinp, [&] {
                relu2_forward_twin(out.data(), x.data(), n);
                return dot(r, out.data());
            }, scale);
        }
}

TEST_CASE("ReLU²: the checker rejects relu(x) (the 2 missing) and 2x (the relu missing)",
          "[gradcheck][layers][relu2]") {
    const size_t n = 31;
    Vec x = randn(n, 940), r = randn(n, 941), out(n), no_two(n), no_relu(n);
    for (size_t i = 0; i < n; i++) {
        no_two[i] = std::max(x[i], 0.0) * r[i];
        no_relu[i] = 2 * x[i] * r[i];
    }
    auto loss = [&] {
        relu2_forward_twin(out.data(), x.data(), n);
        return dot(r, out.data());
    };
    check_grad_fails("relu(x)", x, no_two, loss);
    check_grad_fails("2x", x, no_relu, loss);
}

TEST_CASE("ReLU² kernels are bit-identical to the float twin on every SIMD target",
          "[simd][layers][relu2]") {
    for_each_target([&] {
        for (size_t n : kLengths) {
            CAPTURE(n);
            const Floats x = randn<float>(n, 950 + n, 3.0), dout = randn<float>(n, 951 + n);
            Floats out(n), ref(n), d(n), rd(n);
            relu2_forward(out.data(), x.data(), n);
            relu2_forward_twin(ref.data(), x.data(), n);
            relu2_backward(d.data(), x.data(), dout.data(), n);
            relu2_backward_twin(rd.data(), x.data(), dout.data(), n);
            CHECK(mismatches(out, ref) == 0);
            CHECK(mismatches(d, rd) == 0);
        }
    });
}

// ---- Logit soft-cap -------------------------------------------------------------------------

TEST_CASE("Soft-cap backward matches finite differences, caps 1 to 30, logits up to 100x the cap",
          "[gradcheck][layers][softcap]") {
    for (double cap : {1.0, 5.0, 30.0})
        for (double scale : {0.1, 1.0, 10.0, 100.0}) {
            CAPTURE(cap, scale);
            const size_t n = 31;
            Vec z = randn(n, 960, scale * cap / 10), r = randn(n, 961), out(n), dz(n);
            softcap_forward_twin(out.data(), z.data(), n, cap);
            softcap_backward_twin(dz.data(), out.data(), r.data(), n, cap);
            check_grad("dz", z, dz, [&] {
                softcap_forward_twin(out.data(), z.data(), n, cap);
                return dot(r, out.data());
            }, scale * cap / 10);
        }
}

TEST_CASE("Soft-cap: the checker rejects sech²/S (the S not cancelled) and 1 - tanh²(z)",
          "[gradcheck][layers][softcap]") {
    const size_t n = 31;
    const double cap = 3.0;
    Vec z = randn(n, 970, 2.0), r = randn(n, 971), out(n), over_s(n), no_scale(n);
    softcap_forward_twin(out.data(), z.data(), n, cap);
    softcap_backward_twin(over_s.data(), out.data(), r.data(), n, cap);
    for (size_t i = 0; i < n; i++) {
        over_s[i] /= cap;
        no_scale[i] = (1 - std::tanh(z[i]) * std::tanh(z[i])) * r[i];
    }
    auto loss = [&] {
        softcap_forward_twin(out.data(), z.data(), n, cap);
        return dot(r, out.data());
    };
    check_grad_fails("sech^2 / S", z, over_s, loss);
    check_grad_fails("1 - tanh^2(z)", z, no_scale, loss);
}

TEST_CASE("Soft-cap kernels match the float twin on every SIMD target", "[simd][layers][softcap]") {
    for_each_target([&] {
        for (size_t n : kLengths)
            for (float cap : {1.0f, 30.0f})
                for (double scale : {0.3, 3.0}) {  // logits well inside the cap, and saturating
                    CAPTURE(n, cap, scale);
                    const Floats z = randn<float>(n, 980 + n, scale * cap),
                                 dout = randn<float>(n, 981 + n);
                    Floats y(n), ref(n), d(n), rd(n);
                    softcap_forward(y.data(), z.data(), n, cap);
                    softcap_forward_twin(ref.data(), z.data(), n, cap);
                    softcap_backward(d.data(), y.data(), dout.data(), n, cap);
                    softcap_backward_twin(rd.data(), y.data(), dout.data(), n, cap);
                    const double fwd = ulps(y, ref, abs_of(ref)), bwd = ulps(d, rd, abs_of(dout));
                    INFO("ulps: out " << fwd << " dz " << bwd);
                    CHECK(fwd <= kSoftcapFwdUlps);
                    CHECK(bwd <= kSoftcapBwdUlps);
                    for (size_t i = 0; i < n; i++) REQUIRE(std::fabs(y[i]) <= cap);
                }
    });
}

// ---- All three: double twin, threads, extremes, contract, bad arguments ---------------------

TEST_CASE("SwiGLU, ReLU² and soft-cap fast paths match the double twin on long arrays",
          "[layers][swiglu][relu2][softcap]") {
    const int N = 97, H = 1031;  // threaded, H not a multiple of any vector width
    const Floats inp = randn<float>(size_t(N) * 2 * H, 990, 3.0),
                 dh = randn<float>(size_t(N) * H, 991);
    Floats out(dh.size()), dinp(inp.size());
    swiglu_forward(out.data(), inp.data(), N, H);
    swiglu_backward(dinp.data(), inp.data(), dh.data(), N, H);
    const Vec I = to_double(inp), DH = to_double(dh);
    Vec ref(out.size()), rdinp(inp.size());
    swiglu_forward_twin(ref.data(), I.data(), N, H);
    swiglu_backward_twin(rdinp.data(), I.data(), DH.data(), N, H);
    const double fwd = ulps(out, ref, swiglu_out_scale(inp, N, H));
    const auto [da, db] = split_ulps(dinp, rdinp, swiglu_dinp_scale(inp, dh, N, H), N, H);
    INFO("SwiGLU ulps vs double: out " << fwd << " da " << da << " db " << db);
    CHECK(fwd <= kSwigluUlps);
    CHECK(da <= kSwigluUlps);
    CHECK(db <= kSwigluUlps);

    const size_t n = 100003;
    const float cap = 15.0f;
    const Floats z = randn<float>(n, 992, 20.0), dy = randn<float>(n, 993);
    Floats y(n), dz(n), r2(n), dr2(n);
    softcap_forward(y.data(), z.data(), n, cap);
    softcap_backward(dz.data(), y.data(), dy.data(), n, cap);
    relu2_forward(r2.data(), z.data(), n);
    relu2_backward(dr2.data(), z.data(), dy.data(), n);
    const Vec Z = to_double(z), DY = to_double(dy);
    Vec ry(n), rdz(n), rr2(n), rdr2(n);
    softcap_forward_twin(ry.data(), Z.data(), n, double(cap));
    softcap_backward_twin(rdz.data(), ry.data(), DY.data(), n, double(cap));
    relu2_forward_twin(rr2.data(), Z.data(), n);
    relu2_backward_twin(rdr2.data(), Z.data(), DY.data(), n);
    const double cf = ulps(y, ry, abs_of(ry)),
                 cb = ulps(dz, rdz, abs_of(dy));
    INFO("soft-cap ulps vs double: out " << cf << " dz " << cb);
    CHECK(cf <= kSoftcapFwdUlps);
    CHECK(cb <= kSoftcapBwdVsDouble);
    // ReLU²: one rounding of r² and of (2r)·dout
    CHECK(ulps(r2, rr2, abs_of(r2)) <= 0.5);
    CHECK(ulps(dr2, rdr2, abs_of(dr2)) <= 0.5);
}

#ifdef _OPENMP
TEST_CASE("SwiGLU, ReLU² and soft-cap give bit-identical results with 1, 2 and 3 threads",
          "[layers][swiglu][relu2][softcap]") {
    const int N = 64, H = 1031;
    const size_t n = size_t(N) * H;
    const Floats inp = randn<float>(2 * n, 1000, 2.0), dh = randn<float>(n, 1001);
    check_same_bits_with_1_2_3_threads([&] {
        Floats out(n), dinp(2 * n), r2(n), dr2(n), y(n), dz(n);
        swiglu_forward(out.data(), inp.data(), N, H);
        swiglu_backward(dinp.data(), inp.data(), dh.data(), N, H);
        relu2_forward(r2.data(), inp.data(), n);
        relu2_backward(dr2.data(), inp.data(), dh.data(), n);
        softcap_forward(y.data(), inp.data(), n, 2.0f);
        softcap_backward(dz.data(), y.data(), dh.data(), n, 2.0f);
        return std::vector<Floats>{out, dinp, r2, dr2, y, dz};
    });
}
#endif

TEST_CASE("SwiGLU and soft-cap kernels at extreme inputs: finite, with the right limits",
          "[simd][layers][swiglu][softcap]") {
    const Floats a = {-1e30f, -1e6f, -200.f, -90.f, -20.f, 0.f, 20.f, 90.f, 1e6f, 1e30f};
    const size_t n = a.size();
    const Floats ones(n, 1.0f);
    for_each_target([&] {
        Floats inp(2 * n), out(n), dinp(2 * n), y(n), dz(n);
        for (size_t i = 0; i < n; i++) inp[i] = a[i], inp[n + i] = 1.0f;  // b = 1
        swiglu_forward(out.data(), inp.data(), 1, int(n));
        swiglu_backward(dinp.data(), inp.data(), ones.data(), 1, int(n));
        softcap_forward(y.data(), a.data(), n, 30.0f);
        softcap_backward(dz.data(), y.data(), ones.data(), n, 30.0f);
        for (size_t i = 0; i < n; i++) {
            CAPTURE(a[i], out[i], dinp[i], dinp[n + i], y[i], dz[i]);
            REQUIRE(std::isfinite(out[i]));
            REQUIRE(std::isfinite(dinp[i]));
            REQUIRE(std::isfinite(dinp[n + i]));
            REQUIRE(std::isfinite(y[i]));
            REQUIRE(std::isfinite(dz[i]));
            if (a[i] <= -90.f) CHECK(std::fabs(out[i]) < 1e-30f);  // silu → 0
            if (a[i] >= 20.f) CHECK(out[i] == a[i]);                // silu(a) → a
            if (a[i] >= 20.f) CHECK(dinp[i] == 1.0f);               // silu' → 1
            if (std::fabs(a[i]) >= 1e6f) CHECK(std::fabs(y[i]) == 30.0f);
            if (std::fabs(a[i]) >= 1e6f) CHECK(dz[i] == 0.0f);
        }
        CHECK(out[5] == 0.0f);
        CHECK(dinp[5] == 0.5f);  // silu'(0) = σ(0)
        CHECK(y[5] == 0.0f);
        CHECK(dz[5] == 1.0f);
    });
}

TEST_CASE("SwiGLU, ReLU² and soft-cap backwards write their input gradient; in place gives the "
          "same bits", "[layers][swiglu][relu2][softcap]") {
    const int N = 6, H = 37;
    const size_t n = size_t(N) * H;
    const Floats inp = randn<float>(2 * n, 1010), dh = randn<float>(n, 1011);
    check_writes_and_adds("swiglu", {randn<float>(2 * n, 1012)}, {false}, [&](auto& g) {
        swiglu_backward(g[0].data(), inp.data(), dh.data(), N, H);
    });
    check_writes_and_adds("relu2", {randn<float>(n, 1013)}, {false}, [&](auto& g) {
        relu2_backward(g[0].data(), inp.data(), dh.data(), n);
    });
    Floats y(n);
    softcap_forward(y.data(), inp.data(), n, 2.0f);
    check_writes_and_adds("softcap", {randn<float>(n, 1014)}, {false}, [&](auto& g) {
        softcap_backward(g[0].data(), y.data(), dh.data(), n, 2.0f);
    });

    Floats d(2 * n), in_place = inp;
    swiglu_backward(d.data(), inp.data(), dh.data(), N, H);
    swiglu_backward(in_place.data(), in_place.data(), dh.data(), N, H);  // dinp = inp
    CHECK(mismatches(in_place, d) == 0);
    Floats r(n), r_in_place(inp.begin(), inp.begin() + n), dr(n), dr_in_place = dh;
    relu2_forward(r.data(), inp.data(), n);
    relu2_forward(r_in_place.data(), r_in_place.data(), n);
    CHECK(mismatches(r_in_place, r) == 0);
    relu2_backward(dr.data(), inp.data(), dh.data(), n);
    relu2_backward(dr_in_place.data(), inp.data(), dr_in_place.data(), n);  // dinp = dout
    CHECK(mismatches(dr_in_place, dr) == 0);
    Floats logits(inp.begin(), inp.begin() + n), dz(n), dlogits = dh;
    softcap_forward(logits.data(), logits.data(), n, 2.0f);  // in place on the logits
    CHECK(mismatches(logits, y) == 0);
    softcap_backward(dz.data(), y.data(), dh.data(), n, 2.0f);
    softcap_backward(dlogits.data(), logits.data(), dlogits.data(), n, 2.0f);
    CHECK(mismatches(dlogits, dz) == 0);
}

TEST_CASE("SwiGLU, ReLU² and soft-cap: bad sizes and caps are hg::Error",
          "[layers][swiglu][relu2][softcap]") {
    Floats a(64, 1.0f), b(64, 1.0f);
    float* p = a.data();
    const float* q = b.data();
    const size_t neg_n = static_cast<size_t>(-3);  // a negative int passed as a size_t
    CHECK_THROWS_WITH(swiglu_forward(p, q, 2, 0), Catch::Contains("H = 0"));
    CHECK_THROWS_AS(swiglu_backward(p, q, q, -1, 4), hg::Error);
    CHECK_THROWS_AS(swiglu_forward_twin(p, q, 0, 4), hg::Error);
    CHECK_THROWS_WITH(relu2_forward(p, q, neg_n), Catch::Contains("n (-3)"));
    CHECK_THROWS_AS(relu2_backward(p, q, q, 0), hg::Error);
    CHECK_THROWS_AS(relu2_forward_twin(p, q, 0), hg::Error);
    CHECK_THROWS_WITH(softcap_forward(p, q, 8, 0.0f), Catch::Contains("0 means no cap"));
    CHECK_THROWS_AS(softcap_forward(p, q, 8, -1.0f), hg::Error);
    CHECK_THROWS_AS(softcap_backward(p, q, q, 8, NAN), hg::Error);
    CHECK_THROWS_AS(softcap_backward(p, q, q, 8, INFINITY), hg::Error);
    CHECK_THROWS_AS(softcap_forward(p, q, 0, 30.0f), hg::Error);
    CHECK_THROWS_AS(softcap_backward_twin(p, q, q, neg_n, 30.0f), hg::Error);
}

// test_kernels_vs_twins.cpp — the fast float layers (Highway kernels + OpenMP) against their
// scalar twins: on every SIMD target this CPU runs, against the float twin; against the double twin;
// across thread counts (bit-identical); and the kernels' own Φ (erf) against double erfc.
//
// Tolerances (eps = FLT_EPSILON = 1.19e-7), with the worst values measured on this machine
// (AVX2, SSE4, SSSE3, SCALAR targets) when they were set:
//   Φ kernel vs double erfc, x in [-20, 20]       |err| <= 1e-7               measured 6.5e-8
//   GELU forward, elementwise                      <= 3 eps·|x|                measured 1.0
//   GELU backward, elementwise                     <= 4 eps·|dout|             measured 1.92
//     (both vs the float twin, which uses std::erfc / std::tanh / std::cosh, and vs double)
//   LayerNorm vs float twin, max error / max |ref| <= 2e-6                     measured 7.8e-7
//     (the mean of C = 1000 numbers summed in another order; dinp is scaled by rstd·max|g|)
//   LayerNorm vs double twin                       <= 1e-6                     measured 3.1e-7
//   residual, dropout (both passes), encoder: bit-identical to the float twin (one IEEE op each).
#include "tests/catch.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "lib/kernels/dropout_kernels.h"
#include "lib/kernels/gelu_kernels.h"
#include "lib/kernels/normal_kernels.h"
#include "lib/kernels/simd.h"
#include "lib/layers/dropout.h"
#include "lib/layers/encoder.h"
#include "lib/layers/gelu.h"
#include "lib/layers/layernorm.h"
#include "lib/layers/residual.h"
#include "tests/gradcheck.h"
#include "tests/layer_checks.h"

using namespace hg;
using namespace hg::test;
using Floats = std::vector<float>;
using Doubles = std::vector<double>;

namespace {

constexpr double kEps = FLT_EPSILON;  // 1.19e-7, one ulp of 1.0f
constexpr double kGeluFwdUlps = 3, kGeluBwdUlps = 4;
constexpr double kLnVsFloatTwin = 2e-6, kLnVsDouble = 1e-6;
const size_t kLengths[] = {1, 5, 7, 33, 127, 1000};

// The natural scale of LayerNorm's dinp = rstd·(g - mean(g) - x̂·mean(g⊙x̂)), g = dout⊙weight:
// max over rows of rstd·max|g|. (max|dinp| can be ~0 by cancellation: C = 1 gives dinp = 0.)
double layernorm_dinp_scale(const Floats& dout, const Floats& w, const Floats& rstd, int N, int C) {
    double scale = 0;
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            scale = std::max(scale, double(rstd[n]) * std::fabs(double(dout[size_t(n) * C + c]) * w[c]));
    return scale;
}

// GELU, elementwise, in ulps of the natural scale of each element:
//   forward   |out - ref| / (eps · |x|)                 (gelu(x) = x·Φ(x), Φ in [0, 1])
//   backward  |dinp - ref| / (eps · |dout|)           (gelu' is in [-0.17, 1.13]; dinp is
//             written, so what it held before does not enter)
template <class T>
double gelu_fwd_ulps(const Floats& out, const std::vector<T>& ref, const Floats& x) {
    double worst = 0;
    for (size_t i = 0; i < out.size(); i++)
        worst = std::max(worst, std::fabs(double(out[i]) - double(ref[i])) /
                                    (kEps * std::fabs(double(x[i])) + 1e-37));
    return worst;
}
template <class T>
double gelu_bwd_ulps(const Floats& dinp, const std::vector<T>& ref, const Floats& dout) {
    double worst = 0;
    for (size_t i = 0; i < dinp.size(); i++)
        worst = std::max(worst, std::fabs(double(dinp[i]) - double(ref[i])) /
                                    (kEps * std::fabs(dout[i]) + 1e-37));
    return worst;
}

const char* kind_name(GeluKind k) { return k == GeluKind::Erf ? "erf" : "tanh"; }

}  // namespace

// ---- Φ, the kernels' erf ---------------------------------------------------------------------

TEST_CASE("Kernel Phi (its erf) is within 1e-7 of double erfc on [-20, 20]", "[simd][gelu]") {
    const size_t n = 40001;
    Floats x(n), phi(n);
    for (size_t i = 0; i < n; i++) x[i] = float(-20.0 + 1e-3 * double(i));
    for_each_target([&] {
        normal_cdf_kernel(phi.data(), x.data(), n);
        double worst = 0;
        bool monotone = true, in_range = true;
        for (size_t i = 0; i < n; i++) {
            const double ref = 0.5 * std::erfc(-double(x[i]) / std::sqrt(2.0));
            worst = std::max(worst, std::fabs(phi[i] - ref));
            if (i > 0 && phi[i] < phi[i - 1]) monotone = false;
            if (!(phi[i] >= 0.0f && phi[i] <= 1.0f)) in_range = false;
        }
        INFO("max |Phi - erfc ref| = " << worst);
        CHECK(worst <= 1e-7);
        CHECK(monotone);
        CHECK(in_range);
    });
}

// ---- Kernels vs float twins, every target ----------------------------------------------------

TEST_CASE("GELU kernels match the float twin on every SIMD target", "[simd][gelu]") {
    for_each_target([&] {
        for (GeluKind kind : {GeluKind::Erf, GeluKind::Tanh})
            for (size_t n : kLengths)
                for (double scale : {1.0, 10.0}) {
                    CAPTURE(kind_name(kind), n, scale);
                    Floats x = randn<float>(n, 17 + n, scale), dout = randn<float>(n, 18 + n);
                    Floats dinp0 = randn<float>(n, 19 + n);
                    Floats out(n), ref(n), dinp = dinp0, dref = dinp0;
                    gelu_forward(out.data(), x.data(), n, kind);
                    gelu_forward_twin(ref.data(), x.data(), n, kind);
                    gelu_backward(dinp.data(), x.data(), dout.data(), n, kind);
                    gelu_backward_twin(dref.data(), x.data(), dout.data(), n, kind);
                    const double fwd = gelu_fwd_ulps(out, ref, x);
                    const double bwd = gelu_bwd_ulps(dinp, dref, dout);
                    INFO("forward " << fwd << " ulp of |x|, backward " << bwd << " ulp");
                    CHECK(fwd <= kGeluFwdUlps);
                    CHECK(bwd <= kGeluBwdUlps);
                }
    });
}

TEST_CASE("LayerNorm kernels match the float twin on every SIMD target", "[simd][layernorm]") {
    for_each_target([&] {
        for (size_t C_ : kLengths) {
            const int N = 3, C = int(C_);
            const size_t n = size_t(N) * C;
            CAPTURE(C);
            Floats x = randn<float>(n, 31 + C, 2.0), w = randn<float>(C, 32 + C),
                   b = randn<float>(C, 33 + C), dout = randn<float>(n, 34 + C);
            for (auto& v : x) v += 3.0f;  // a nonzero mean, as real activations have
            Floats out(n), mean(N), rstd(N), ref(n), rmean(N), rrstd(N);
            layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
            layernorm_forward_twin(ref.data(), rmean.data(), rrstd.data(), x.data(), w.data(),
                                   b.data(), N, C);
            Floats dinp(n), dw(C), db(C), rdinp(n), rdw(C), rdb(C);
            layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                               mean.data(), rstd.data(), N, C);
            layernorm_backward_twin(rdinp.data(), rdw.data(), rdb.data(), dout.data(), x.data(),
                                    w.data(), rmean.data(), rrstd.data(), N, C);
            const double e_out = scaled_error(out, ref), e_mean = scaled_error(mean, rmean),
                         e_rstd = scaled_error(rstd, rrstd),
                         e_dinp = scaled_error(dinp, rdinp, layernorm_dinp_scale(dout, w, rstd, N, C)),
                         e_dw = scaled_error(dw, rdw), e_db = scaled_error(db, rdb);
            INFO("scaled errors: out " << e_out << " mean " << e_mean << " rstd " << e_rstd
                                       << " dinp " << e_dinp << " dweight " << e_dw << " dbias "
                                       << e_db);
            CHECK(e_out <= kLnVsFloatTwin);
            CHECK(e_mean <= kLnVsFloatTwin);
            CHECK(e_rstd <= kLnVsFloatTwin);
            CHECK(e_dinp <= kLnVsFloatTwin);
            CHECK(e_dw <= kLnVsFloatTwin);
            CHECK(e_db <= kLnVsFloatTwin);
        }
    });
}

// The bf16 variants (dtype bfloat16: the next product's input, written by the layer) run the same
// kernels in pieces and round: their bits must be the float layer's, rounded, at lengths that
// cross their pieces (GELU's 8192-number chunks, and a tail short of a vector), GELU's backward
// with and without its float output. A planted slip — the other GELU form — must show.
TEST_CASE("GELU and LayerNorm in bf16 write the float layer's results, rounded, on every SIMD target",
          "[simd][gelu][layernorm][bf16]") {
    auto rounded = [](const Floats& x) {
        std::vector<bf16> r(x.size());
        for (size_t i = 0; i < x.size(); i++) r[i] = bf16_from_float(x[i]);
        return r;
    };
    for_each_target([&] {
        for (size_t n : {size_t(5), size_t(1000), size_t(20000)})
            for (GeluKind kind : {GeluKind::Erf, GeluKind::Tanh}) {
                CAPTURE(kind_name(kind), n);
                const Floats x = randn<float>(n, 61 + n, 3.0), dout = randn<float>(n, 62 + n);
                Floats out(n), dinp(n), dinp_b(n, 7.0f);
                std::vector<bf16> out16(n, 0x7FC0), dinp16(n, 0x7FC0);
                gelu_forward(out.data(), x.data(), n, kind);
                gelu_forward_bf16(out16.data(), x.data(), n, kind);
                CHECK(out16 == rounded(out));
                gelu_backward(dinp.data(), x.data(), dout.data(), n, kind);
                gelu_backward_bf16(dinp_b.data(), dinp16.data(), x.data(), dout.data(), n, kind);
                CHECK(std::memcmp(dinp.data(), dinp_b.data(), n * sizeof(float)) == 0);
                CHECK(dinp16 == rounded(dinp));
                // without the float dinp (no bias to sum it), the rounded one alone: the same bits
                std::vector<bf16> alone(n, 0x7FC0);
                gelu_backward_bf16(nullptr, alone.data(), x.data(), dout.data(), n, kind);
                CHECK(alone == dinp16);
                gelu_backward_bf16(nullptr, alone.data(), x.data(), dout.data(), n,
                                   kind == GeluKind::Erf ? GeluKind::Tanh : GeluKind::Erf);
                if (n >= 1000) CHECK(alone != dinp16);  // the planted slip shows here too
                gelu_forward_bf16(out16.data(), x.data(), n, kind == GeluKind::Erf ? GeluKind::Tanh : GeluKind::Erf);
                if (n >= 1000) CHECK(out16 != rounded(out));  // the planted slip
            }
        for (int C : {1, 7, 384, 1000}) {
            const int N = 5;
            CAPTURE(C);
            const Floats x = randn<float>(size_t(N) * C, 63 + C, 2.0), w = randn<float>(C, 64), b = randn<float>(C, 65);
            Floats out(size_t(N) * C), mean(N), rstd(N), mean16(N, 7.0f), rstd16(N, 7.0f);
            std::vector<bf16> out16(out.size(), 0x7FC0);
            layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
            layernorm_forward_bf16(out16.data(), mean16.data(), rstd16.data(), x.data(), w.data(), b.data(), N, C);
            CHECK(out16 == rounded(out));
            CHECK(std::memcmp(mean.data(), mean16.data(), N * sizeof(float)) == 0);
            CHECK(std::memcmp(rstd.data(), rstd16.data(), N * sizeof(float)) == 0);
        }
    });
}

// The mask's hash runs in 64-bit lanes in the kernel and one element at a time in
// Dropout::keep: every element's kept-or-dropped must agree, at any start index (the lanes'
// counters start from i0), including counters that wrap, and for p near 0 and near 1.
TEST_CASE("The dropout kernel keeps exactly the elements Dropout::keep keeps, on every SIMD target",
          "[simd][dropout]") {
    const size_t n = 1000;
    Floats x(n, 1.5f), out(n), out2a(n), out2b(n);
    for (int j = 0; j < 100; j++) x[size_t(j) * 7 % n] = -2.25f;  // signs: dropped negatives are +0 too
    const Floats x2 = randn<float>(n, 66);
    for_each_target([&] {
        for (float p : {1e-7f, 0.05f, 0.1f, 0.2f, 0.5f, 0.999f})
            for (size_t i0 : {size_t(0), size_t(3), size_t(123457), ~size_t(0) - 500}) {
                for (uint64_t key : {uint64_t(0), uint64_t(0x5eedULL), ~uint64_t(0)}) {
                    const Dropout drop{p, key};
                    dropout_apply_kernel(out.data(), x.data(), n, drop, i0);
                    // the two-array form: the same mask on both, from one hash
                    dropout_apply2_kernel(out2a.data(), x.data(), out2b.data(), x2.data(), n, drop, i0);
                    size_t bad = 0, kept = 0;
                    for (size_t j = 0; j < n; j++) {
                        const float want = drop.apply(x[j], i0 + j), want2 = drop.apply(x2[j], i0 + j);
                        bad += std::memcmp(&out[j], &want, sizeof(float)) != 0;
                        bad += std::memcmp(&out2a[j], &want, sizeof(float)) != 0;
                        bad += std::memcmp(&out2b[j], &want2, sizeof(float)) != 0;
                        kept += drop.keep(i0 + j);
                    }
                    CAPTURE(p, i0, key, kept);
                    CHECK(bad == 0);
                }
            }
        // in place, and a planted mismatch is seen: a different key keeps other elements
        Floats y = x;
        dropout_apply_kernel(y.data(), y.data(), n, Dropout{0.3f, 9}, 0);
        Floats z(n);
        dropout_apply_kernel(z.data(), x.data(), n, Dropout{0.3f, 10}, 0);
        CHECK(mismatches(y, z) > 100);
        dropout_apply_kernel(z.data(), x.data(), n, Dropout{0.3f, 9}, 0);
        CHECK(mismatches(y, z) == 0);
    });
}

TEST_CASE("Residual, dropout and encoder kernels equal the float twin on every SIMD target",
          "[simd][residual][dropout][encoder]") {
    for_each_target([&] {
        for (size_t n : kLengths) {
            CAPTURE(n);
            Floats a = randn<float>(n, 41 + n), b = randn<float>(n, 42 + n), g = randn<float>(n, 43 + n);
            Floats out(n), ref(n);
            residual_forward(out.data(), a.data(), b.data(), n);
            residual_forward_twin(ref.data(), a.data(), b.data(), n);
            CHECK(mismatches(out, ref) == 0);

            const Dropout drop{0.3f, 77};
            Floats dx = g, rdx = g;
            dropout_forward(out.data(), a.data(), n, drop);
            dropout_forward_twin(ref.data(), a.data(), n, drop);
            CHECK(mismatches(out, ref) == 0);
            dropout_backward(dx.data(), b.data(), n, drop);  // writes: dx's old contents do not matter
            dropout_backward_twin(rdx.data(), b.data(), n, drop);
            CHECK(mismatches(dx, rdx) == 0);

            // encoder with C = n
            const int B = 2, T = 3, V = 3, C = int(n);
            const std::vector<int> idx = {2, 0, 2, 2, 1, 2};
            Floats wte = randn<float>(size_t(V) * C, 44 + n), wpe = randn<float>(size_t(T) * C, 45 + n);
            Floats dout = randn<float>(size_t(B) * T * C, 46 + n);
            Floats eo(dout.size()), er(dout.size());
            encoder_forward(eo.data(), idx.data(), wte.data(), wpe.data(), B, T, C, V);
            encoder_forward_twin(er.data(), idx.data(), wte.data(), wpe.data(), B, T, C, V);
            CHECK(mismatches(eo, er) == 0);
            Floats dwte = wte, dwpe = wpe, rdwte = wte, rdwpe = wpe;  // nonzero: += is exercised
            encoder_backward(dwte.data(), dwpe.data(), dout.data(), idx.data(), B, T, C);
            encoder_backward_twin(rdwte.data(), rdwpe.data(), dout.data(), idx.data(), B, T, C);
            CHECK(mismatches(dwte, rdwte) == 0);
            CHECK(mismatches(dwpe, rdwpe) == 0);
        }
    });
}

// ---- Fast float path vs double twin ----------------------------------------------------------

TEST_CASE("The normal kernel makes Rng::normal's values on every SIMD target, wherever a value sits",
          "[simd][init]") {
    // The twin: float(scale · Rng::normal()), draws taken in order. The kernel's logarithm and
    // cosine are Highway's, so a value may differ in the last bit of a double; after rounding to
    // float that shows as at most one float ulp, and rarely (none in 20 million values here).
    for_each_target([&] {
        for (size_t n : {size_t(1), size_t(5), size_t(63), size_t(64), size_t(65), size_t(1000), size_t(70000)})
            for (uint64_t seed : {uint64_t(0), uint64_t(42), ~uint64_t(0)}) {
                CAPTURE(n, seed);
                const double scale = 0.02;
                Floats out(n), twin(n);
                Rng rng(seed);
                normal_kernel(out.data(), n, rng, scale);
                Rng r = rng;
                for (float& x : twin) x = float(scale * r.normal());
                size_t differ = 0, beyond_one_ulp = 0;
                for (size_t i = 0; i < n; i++) {
                    differ += out[i] != twin[i];
                    beyond_one_ulp += out[i] != twin[i] && out[i] != std::nextafter(twin[i], out[i]);
                }
                CHECK(beyond_one_ulp == 0);
                CHECK(differ * 10000 <= n);
                // value i depends only on draws 2i and 2i+1: a piece started at i0 (rng moved on
                // by 2·i0 draws) gives the same bits as the whole run
                for (size_t i0 : {size_t(1), size_t(3), n / 2}) {
                    if (i0 >= n) continue;
                    Rng moved = rng;
                    moved.discard(2 * i0);
                    Floats piece(n - i0);
                    normal_kernel(piece.data(), piece.size(), moved, scale);
                    CHECK(std::equal(piece.begin(), piece.end(), out.begin() + std::ptrdiff_t(i0)));
                }
            }
    });
}

TEST_CASE("Fast float layers match the double twin on random inputs",
          "[layernorm][gelu][residual][dropout][encoder]") {
    SECTION("LayerNorm, N = 64, C = 768 (threaded), and N = 6, C = 5") {
        for (auto [N, C] : {std::pair<int, int>{64, 768}, {6, 5}}) {
            CAPTURE(N, C);
            const size_t n = size_t(N) * C;
            Floats x = randn<float>(n, 51, 3.0), w = randn<float>(C, 52), b = randn<float>(C, 53),
                   dout = randn<float>(n, 54);
            Floats out(n), mean(N), rstd(N), dinp(n), dw(C), db(C);
            layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
            layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                               mean.data(), rstd.data(), N, C);
            Doubles X = to_double(x), W = to_double(w), Bb = to_double(b), DO = to_double(dout);
            Doubles ref(n), rmean(N), rrstd(N), rdinp(n), rdw(C), rdb(C);
            layernorm_forward_twin(ref.data(), rmean.data(), rrstd.data(), X.data(), W.data(),
                                   Bb.data(), N, C);
            layernorm_backward_twin(rdinp.data(), rdw.data(), rdb.data(), DO.data(), X.data(),
                                    W.data(), rmean.data(), rrstd.data(), N, C);
            const double e_out = scaled_error(out, ref),
                         e_dinp = scaled_error(dinp, rdinp, layernorm_dinp_scale(dout, w, rstd, N, C)),
                         e_dw = scaled_error(dw, rdw), e_db = scaled_error(db, rdb),
                         e_rstd = scaled_error(rstd, rrstd);
            INFO("scaled errors: out " << e_out << " rstd " << e_rstd << " dinp " << e_dinp
                                       << " dweight " << e_dw << " dbias " << e_db);
            CHECK(e_out <= kLnVsDouble);
            CHECK(e_rstd <= kLnVsDouble);
            CHECK(e_dinp <= kLnVsDouble);
            CHECK(e_dw <= kLnVsDouble);
            CHECK(e_db <= kLnVsDouble);
        }
    }
    SECTION("GELU, n = 100003 (threaded)") {
        const size_t n = 100003;
        for (GeluKind kind : {GeluKind::Erf, GeluKind::Tanh})
            for (double scale : {1.0, 10.0}) {
                CAPTURE(kind_name(kind), scale);
                Floats x = randn<float>(n, 61, scale), dout = randn<float>(n, 62), dinp0 = randn<float>(n, 63);
                Floats out(n), dinp = dinp0;
                gelu_forward(out.data(), x.data(), n, kind);
                gelu_backward(dinp.data(), x.data(), dout.data(), n, kind);
                Doubles X = to_double(x), ref(n), dref = to_double(dinp0), DO = to_double(dout);
                gelu_forward_twin(ref.data(), X.data(), n, kind);
                gelu_backward_twin(dref.data(), X.data(), DO.data(), n, kind);
                const double fwd = gelu_fwd_ulps(out, ref, x), bwd = gelu_bwd_ulps(dinp, dref, dout);
                INFO("forward " << fwd << " ulp of |x|, backward " << bwd << " ulp");
                CHECK(fwd <= kGeluFwdUlps);
                CHECK(bwd <= kGeluBwdUlps);
            }
    }
    SECTION("residual, dropout, encoder: within one rounding of the double twin") {
        const size_t n = 100003;
        Floats a = randn<float>(n, 71), b = randn<float>(n, 72), out(n);
        residual_forward(out.data(), a.data(), b.data(), n);
        Doubles ref(n), A = to_double(a), Bv = to_double(b);
        residual_forward_twin(ref.data(), A.data(), Bv.data(), n);
        CHECK(scaled_error(out, ref) <= kEps);
        const Dropout drop{0.1f, 3};
        dropout_forward(out.data(), a.data(), n, drop);
        dropout_forward_twin(ref.data(), A.data(), n, drop);
        CHECK(scaled_error(out, ref) <= kEps);
    }
}

TEST_CASE("GELU kernels at extreme inputs: finite, with the right limits", "[simd][gelu]") {
    const Floats x = {-1e6f, -1e3f, -60.f, -12.f, 0.f, 12.f, 60.f, 1e3f, 1e6f};
    const size_t n = x.size();
    for_each_target([&] {
        for (GeluKind kind : {GeluKind::Erf, GeluKind::Tanh}) {
            CAPTURE(kind_name(kind));
            Floats out(n), grad(n, 0.0f), ones(n, 1.0f);
            gelu_forward(out.data(), x.data(), n, kind);
            gelu_backward(grad.data(), x.data(), ones.data(), n, kind);
            for (size_t i = 0; i < n; i++) {
                CAPTURE(x[i], out[i], grad[i]);
                REQUIRE(std::isfinite(out[i]));
                REQUIRE(std::isfinite(grad[i]));
                if (x[i] <= -12.f) CHECK(std::fabs(out[i]) < 1e-20f);
                if (x[i] >= 12.f) CHECK(out[i] == x[i]);
                if (x[i] <= -12.f) CHECK(std::fabs(grad[i]) < 1e-20f);
                if (x[i] >= 12.f) CHECK(grad[i] == 1.0f);
            }
            CHECK(out[4] == 0.0f);
            CHECK(grad[4] == 0.5f);
        }
    });
}

// ---- Thread count ----------------------------------------------------------------------------

#ifdef _OPENMP
TEST_CASE("Fast layers give bit-identical results with 1, 2 and 3 threads",
          "[layernorm][gelu][residual][dropout][encoder]") {
    const int N = 64, C = 771;  // N·C = 49344 > the parallel threshold; C not a multiple of 64
    const size_t n = size_t(N) * C;
    Floats x = randn<float>(n, 81, 2.0), w = randn<float>(C, 82), b = randn<float>(C, 83),
           dout = randn<float>(n, 84);
    const std::vector<int> idx = [&] {
        std::vector<int> v(N);
        for (int i = 0; i < N; i++) v[i] = (i * 7) % 5;  // V = 5: every token repeats
        return v;
    }();
    const Floats wte = randn<float>(size_t(5) * C, 85), wpe = randn<float>(size_t(16) * C, 86);
    auto run = [&] {
        std::vector<Floats> r;
        Floats out(n), mean(N), rstd(N), dinp(n), dw(C), db(C);
        layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
        layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                           mean.data(), rstd.data(), N, C);
        r.insert(r.end(), {out, mean, rstd, dinp, dw, db});
        for (GeluKind kind : {GeluKind::Erf, GeluKind::Tanh}) {
            Floats g(n), dg(n);
            gelu_forward(g.data(), x.data(), n, kind);
            gelu_backward(dg.data(), x.data(), dout.data(), n, kind);
            r.insert(r.end(), {g, dg});
        }
        Floats res(n), dr(n), dd(n);
        residual_forward(res.data(), x.data(), dout.data(), n);
        dropout_forward(dr.data(), x.data(), n, Dropout{0.2f, 11});
        dropout_backward(dd.data(), dout.data(), n, Dropout{0.2f, 11});
        Floats enc(n), dwte(wte.size()), dwpe(wpe.size());
        encoder_forward(enc.data(), idx.data(), wte.data(), wpe.data(), 4, 16, C, 5);  // B·T = N
        encoder_backward(dwte.data(), dwpe.data(), dout.data(), idx.data(), 4, 16, C);
        r.insert(r.end(), {res, dr, dd, enc, dwte, dwpe});
        return r;
    };
    check_same_bits_with_1_2_3_threads(run);
}
#endif

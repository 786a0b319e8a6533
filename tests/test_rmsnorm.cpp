// test_rmsnorm.cpp — RMSNorm (with and without a gain) and QK-norm, its per-head gain-less form
// in the qkv buffer:
//   [gradcheck]  every input and parameter gradient against central differences, in double on
//                the scalar twins, tiny odd sizes, input scales 0.01 to 10; planted wrong
//                backwards the same checks must reject
//   [simd]       the fast float path against the float twin on every SIMD target, lengths
//                1 .. 1000 (every tail); against the double twin at threaded sizes; the same
//                bits with 1, 2 and 3 threads
//   contract     what each fast backward adds to and writes; bad sizes are hg::Error
//
// Tolerances, max error / the array's scale (max |ref|; for dinp rstd·max|g|, as LayerNorm's
// tests use, since dinp can cancel to ~0), with the worst measured on this machine (AVX3, AVX2,
// SSE4, SSSE3, SCALAR targets) when they were set:
//   vs the float twin   <= 2e-6     measured 5.0e-7 (RMSNorm), 4.6e-7 (QK-norm)
//   vs the double twin  <= 1e-6     measured 2.2e-7 (RMSNorm), 1.1e-7 (QK-norm)
// (Σx² of up to 1000 numbers summed in lanes instead of in order; FMA on AVX2 and up.)
#include "tests/catch.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "lib/core/errors.h"
#include "lib/layers/layernorm.h"
#include "lib/layers/qknorm.h"
#include "lib/layers/rmsnorm.h"
#include "tests/gradcheck.h"
#include "tests/layer_checks.h"

using namespace hg;
using namespace hg::test;
using Vec = std::vector<double>;
using Floats = std::vector<float>;

namespace {

constexpr double kVsFloatTwin = 2e-6, kVsDouble = 1e-6;
const size_t kLengths[] = {1, 5, 7, 33, 127, 1000};

double max_abs(const Floats& v) {
    double m = 0;
    for (float x : v) m = std::max(m, std::fabs(double(x)));
    return m;
}

// The natural scale of a norm's dinp = rstd·(g - ...): max over rows of rstd·max|g|.
double dinp_scale(const Floats& dout, const Floats* w, const Floats& rstd, size_t rows, size_t C) {
    double scale = 0;
    for (size_t n = 0; n < rows; n++)
        for (size_t c = 0; c < C; c++)
            scale = std::max(scale, rstd[n] * std::fabs(dout[n * C + c] * (w ? (*w)[c] : 1.0)));
    return scale;
}

struct RmsNormCase {
    int N, C;
    bool gain;
    Vec inp, weight, r;
    RmsNormCase(int N_, int C_, double scale, uint64_t seed, bool gain_)
        : N(N_), C(C_), gain(gain_), inp(randn(size_t(N_) * C_, seed, scale)),
          weight(randn(C_, seed + 1)), r(randn(size_t(N_) * C_, seed + 2)) {
        for (auto& w : weight) w += 1.0;  // gains near 1, as initialised, but not all equal
    }
    const double* w() const { return gain ? weight.data() : nullptr; }
    double loss() {
        Vec out(inp.size()), rstd(N);
        rmsnorm_forward_twin(out.data(), rstd.data(), inp.data(), w(), N, C);
        return dot(r, out.data());
    }
    Vec rstd() {
        Vec out(inp.size()), s(N);
        rmsnorm_forward_twin(out.data(), s.data(), inp.data(), w(), N, C);
        return s;
    }
};

// RMSNorm backwards with a planted bug: the projection term x̂·mean(g⊙x̂) dropped (rstd taken as
// a constant), or LayerNorm's three-term backward run on an RMSNorm (its extra mean(g) term).
enum class RmsBug { NoProjection, LayerNormBackward };
Vec rmsnorm_backward_buggy(const RmsNormCase& k, const Vec& rstd, RmsBug bug) {
    Vec dinp(k.inp.size());
    if (bug == RmsBug::LayerNormBackward) {
        Vec zero_mean(k.N, 0.0), dw(k.C);
        layernorm_backward_twin(dinp.data(), dw.data(), static_cast<double*>(nullptr), k.r.data(),
                                k.inp.data(), k.w() ? k.w() : Vec(k.C, 1.0).data(),
                                zero_mean.data(), rstd.data(), k.N, k.C);
        return dinp;
    }
    for (int n = 0; n < k.N; n++)
        for (int c = 0; c < k.C; c++)
            dinp[n * k.C + c] = rstd[n] * k.r[n * k.C + c] * (k.gain ? k.weight[c] : 1.0);
    return dinp;
}

struct QkNormCase {
    int B, T, C, NH;
    Vec qkv, r;
    QkNormCase(int B_, int T_, int C_, int NH_, double scale, uint64_t seed)
        : B(B_), T(T_), C(C_), NH(NH_), qkv(randn(size_t(B_) * T_ * 3 * C_, seed, scale)),
          r(randn(qkv.size(), seed + 1)) {}
    // out = qknorm(qkv), rstd
    std::pair<Vec, Vec> forward() const {
        Vec out = qkv, rstd(size_t(B) * T * 2 * NH);
        qknorm_forward_twin(out.data(), rstd.data(), B, T, C, NH);
        return {out, rstd};
    }
    double loss() const { return dot(r, forward().first.data()); }
};

}  // namespace

// ---- RMSNorm: gradient checks ---------------------------------------------------------------

TEST_CASE("RMSNorm backward matches finite differences (dinp, dweight), with and without gain",
          "[gradcheck][layers][rmsnorm]") {
    for (int C : {5, 7})
        for (double scale : {0.01, 0.1, 1.0, 10.0})
            for (bool gain : {true, false}) {
                CAPTURE(C, scale, gain);
                RmsNormCase k(2 * 3, C, scale, 100 + C, gain);
                const Vec rstd = k.rstd();
                Vec dinp(k.inp.size()), dweight(C);
                rmsnorm_backward_twin(dinp.data(), gain ? dweight.data() : nullptr, k.r.data(),
                                      k.inp.data(), k.w(), rstd.data(), k.N, C);
                auto loss = [&] { return k.loss(); };
                check_grad("dinp", k.inp, dinp, loss, scale);
                if (gain) check_grad("dweight", k.weight, dweight, loss);
            }
}

TEST_CASE("RMSNorm: the checker rejects a backward without the projection term, and "
          "LayerNorm's backward", "[gradcheck][layers][rmsnorm]") {
    for (RmsBug bug : {RmsBug::NoProjection, RmsBug::LayerNormBackward})
        for (bool gain : {true, false}) {
            CAPTURE(int(bug), gain);
            RmsNormCase k(6, 5, 1.0, 7, gain);
            const Vec rstd = k.rstd();
            Vec dinp = rmsnorm_backward_buggy(k, rstd, bug);
            check_grad_fails("dinp", k.inp, dinp, [&] { return k.loss(); });
        }
}

TEST_CASE("RMSNorm forward: unit RMS without gain, scale invariance, the gain per column",
          "[layers][rmsnorm]") {
    const int N = 4, C = 9;
    const Vec x = randn(size_t(N) * C, 3, 2.0), w = randn(C, 4);
    Vec out(x.size()), rstd(N), out2(x.size()), rstd2(N), outw(x.size());
    const double* no_gain = nullptr;
    rmsnorm_forward_twin(out.data(), rstd.data(), x.data(), no_gain, N, C);
    Vec x10 = x;
    for (auto& v : x10) v *= 10;
    rmsnorm_forward_twin(out2.data(), rstd2.data(), x10.data(), no_gain, N, C);
    rmsnorm_forward_twin(outw.data(), rstd.data(), x.data(), w.data(), N, C);
    for (int n = 0; n < N; n++) {
        double ms = 0, sq = 0;
        for (int c = 0; c < C; c++) {
            ms += out[n * C + c] * out[n * C + c] / C;
            sq += x[n * C + c] * x[n * C + c] / C;
        }
        CHECK(ms == Approx(sq / (sq + double(kRmsNormEps))).epsilon(1e-12));  // 1 but for eps
        CHECK(rstd[n] == Approx(1 / std::sqrt(sq + double(kRmsNormEps))).epsilon(1e-12));
        for (int c = 0; c < C; c++) {
            CHECK(out2[n * C + c] == Approx(out[n * C + c]).epsilon(1e-5));  // eps/ms ~ 1e-6 apart
            CHECK(outw[n * C + c] == Approx(out[n * C + c] * w[c]).epsilon(1e-14));
        }
    }
}

// ---- QK-norm: gradient checks ---------------------------------------------------------------

TEST_CASE("QK-norm backward matches finite differences (dqkv, v included), per head",
          "[gradcheck][layers][qknorm]") {
    struct Shape { int B, T, C, NH; };
    for (Shape s : {Shape{2, 3, 6, 2}, Shape{1, 3, 5, 1}, Shape{2, 1, 9, 3}})
        for (double scale : {0.01, 0.1, 1.0, 10.0}) {
            CAPTURE(s.B, s.T, s.C, s.NH, scale);
            QkNormCase k(s.B, s.T, s.C, s.NH, scale, 200 + s.C);
            auto [out, rstd] = k.forward();
            Vec dqkv = k.r;
            qknorm_backward_twin(dqkv.data(), out.data(), rstd.data(), s.B, s.T, s.C, s.NH);
            check_grad("dqkv", k.qkv, dqkv, [&] { return k.loss(); }, scale);
        }
}

TEST_CASE("QK-norm: the checker rejects a backward that takes rstd as a constant, and one that "
          "reads the input where the output belongs", "[gradcheck][layers][qknorm]") {
    const int B = 2, T = 3, C = 6, NH = 2;
    QkNormCase k(B, T, C, NH, 1.0, 9);
    auto [out, rstd] = k.forward();
    Vec constant_rstd = k.r;  // dx = rstd·dy on q and k
    for (size_t bt = 0; bt < size_t(B) * T; bt++)
        for (int j = 0; j < 2 * NH; j++)
            for (int i = 0; i < C / NH; i++)
                constant_rstd[bt * 3 * C + j * (C / NH) + i] *= rstd[bt * 2 * NH + j];
    check_grad_fails("dqkv, rstd constant", k.qkv, constant_rstd, [&] { return k.loss(); });
    Vec from_input = k.r;
    qknorm_backward_twin(from_input.data(), k.qkv.data(), rstd.data(), B, T, C, NH);
    check_grad_fails("dqkv, x in place of y", k.qkv, from_input, [&] { return k.loss(); });
}

TEST_CASE("QK-norm forward: every head of q and k has unit RMS, v is untouched",
          "[layers][qknorm]") {
    const int B = 2, T = 3, C = 12, NH = 3, hs = C / NH;
    QkNormCase k(B, T, C, NH, 3.0, 11);
    auto [out, rstd] = k.forward();
    for (size_t bt = 0; bt < size_t(B) * T; bt++) {
        for (int j = 0; j < 2 * NH; j++) {
            double ms = 0, sq = 0;
            for (int i = 0; i < hs; i++) {
                const size_t at = bt * 3 * C + j * hs + i;
                ms += out[at] * out[at] / hs, sq += k.qkv[at] * k.qkv[at] / hs;
            }
            CHECK(ms == Approx(sq / (sq + double(kRmsNormEps))).epsilon(1e-12));
        }
        for (int c = 2 * C; c < 3 * C; c++) CHECK(out[bt * 3 * C + c] == k.qkv[bt * 3 * C + c]);
    }
}

// ---- Fast path vs twins ---------------------------------------------------------------------

TEST_CASE("RMSNorm kernels match the float twin on every SIMD target", "[simd][layers][rmsnorm]") {
    for_each_target([&] {
        for (size_t C_ : kLengths)
            for (bool gain : {true, false}) {
                const int N = 3, C = int(C_);
                const size_t n = size_t(N) * C;
                CAPTURE(C, gain);
                const Floats x = randn<float>(n, 31 + C, 2.0), w = randn<float>(C, 32 + C),
                             dout = randn<float>(n, 33 + C), dinp0 = randn<float>(n, 34 + C),
                             dw0 = randn<float>(C, 35 + C);
                const float* wp = gain ? w.data() : nullptr;
                Floats out(n), rstd(N), ref(n), rrstd(N);
                rmsnorm_forward(out.data(), rstd.data(), x.data(), wp, N, C);
                rmsnorm_forward_twin(ref.data(), rrstd.data(), x.data(), wp, N, C);
                Floats dinp = dinp0, dw = dw0, rdinp = dinp0, rdw = dw0;  // both add
                rmsnorm_backward(dinp.data(), gain ? dw.data() : nullptr, dout.data(), x.data(), wp,
                                 rstd.data(), N, C);
                rmsnorm_backward_twin(rdinp.data(), gain ? rdw.data() : nullptr, dout.data(),
                                      x.data(), wp, rrstd.data(), N, C);
                const double dscale = dinp_scale(dout, gain ? &w : nullptr, rstd, N, C);
                const double e_out = scaled_error(out, ref), e_rstd = scaled_error(rstd, rrstd),
                             e_dinp = scaled_error(dinp, rdinp, dscale), e_dw = scaled_error(dw, rdw);
                INFO("scaled errors: out " << e_out << " rstd " << e_rstd << " dinp " << e_dinp
                                           << " dweight " << e_dw);
                CHECK(e_out <= kVsFloatTwin);
                CHECK(e_rstd <= kVsFloatTwin);
                CHECK(e_dinp <= kVsFloatTwin);
                CHECK(e_dw <= kVsFloatTwin);
            }
    });
}

TEST_CASE("QK-norm kernels match the float twin on every SIMD target", "[simd][layers][qknorm]") {
    for_each_target([&] {
        for (size_t hs : kLengths) {
            const int B = 1, T = 3, NH = 2, C = NH * int(hs);
            CAPTURE(hs);
            const Floats qkv0 = randn<float>(size_t(B) * T * 3 * C, 41 + hs, 2.0),
                         dqkv0 = randn<float>(qkv0.size(), 42 + hs);
            Floats qkv = qkv0, ref = qkv0, rstd(size_t(B) * T * 2 * NH), rrstd(rstd.size());
            qknorm_forward(qkv.data(), rstd.data(), B, T, C, NH);
            qknorm_forward_twin(ref.data(), rrstd.data(), B, T, C, NH);
            Floats dqkv = dqkv0, rdqkv = dqkv0;
            qknorm_backward(dqkv.data(), qkv.data(), rstd.data(), B, T, C, NH);
            qknorm_backward_twin(rdqkv.data(), ref.data(), rrstd.data(), B, T, C, NH);
            const double e_out = scaled_error(qkv, ref), e_rstd = scaled_error(rstd, rrstd),
                         e_d = scaled_error(dqkv, rdqkv, max_abs(rstd) * max_abs(dqkv0));
            INFO("scaled errors: out " << e_out << " rstd " << e_rstd << " dqkv " << e_d);
            CHECK(e_out <= kVsFloatTwin);
            CHECK(e_rstd <= kVsFloatTwin);
            CHECK(e_d <= kVsFloatTwin);
        }
    });
}

TEST_CASE("RMSNorm and QK-norm fast paths match the double twin at threaded sizes",
          "[layers][rmsnorm][qknorm]") {
    SECTION("RMSNorm, N = 64, C = 768, with and without gain") {
        const int N = 64, C = 768;
        const size_t n = size_t(N) * C;
        for (bool gain : {true, false}) {
            CAPTURE(gain);
            const Floats x = randn<float>(n, 51, 3.0), w = randn<float>(C, 52),
                         dout = randn<float>(n, 53);
            const float* wp = gain ? w.data() : nullptr;
            Floats out(n), rstd(N), dinp(n, 0.0f), dw(C, 0.0f);
            rmsnorm_forward(out.data(), rstd.data(), x.data(), wp, N, C);
            rmsnorm_backward(dinp.data(), gain ? dw.data() : nullptr, dout.data(), x.data(), wp,
                             rstd.data(), N, C);
            const Vec X = to_double(x), W = to_double(w), DO = to_double(dout);
            Vec ref(n), rrstd(N), rdinp(n, 0.0), rdw(C, 0.0);
            const double* Wp = gain ? W.data() : nullptr;
            rmsnorm_forward_twin(ref.data(), rrstd.data(), X.data(), Wp, N, C);
            rmsnorm_backward_twin(rdinp.data(), gain ? rdw.data() : nullptr, DO.data(), X.data(),
                                  gain ? W.data() : nullptr, rrstd.data(), N, C);
            const double e_out = scaled_error(out, ref), e_rstd = scaled_error(rstd, rrstd),
                         e_dinp = scaled_error(dinp, rdinp,
                                               dinp_scale(dout, gain ? &w : nullptr, rstd, N, C)),
                         e_dw = gain ? scaled_error(dw, rdw) : 0.0;
            INFO("scaled errors: out " << e_out << " rstd " << e_rstd << " dinp " << e_dinp
                                       << " dweight " << e_dw);
            CHECK(e_out <= kVsDouble);
            CHECK(e_rstd <= kVsDouble);
            CHECK(e_dinp <= kVsDouble);
            CHECK(e_dw <= kVsDouble);
        }
    }
    SECTION("QK-norm, B = 4, T = 64, C = 768, NH = 12") {
        const int B = 4, T = 64, C = 768, NH = 12;
        const Floats qkv0 = randn<float>(size_t(B) * T * 3 * C, 54, 3.0),
                     dqkv0 = randn<float>(qkv0.size(), 55);
        Floats qkv = qkv0, rstd(size_t(B) * T * 2 * NH), dqkv = dqkv0;
        qknorm_forward(qkv.data(), rstd.data(), B, T, C, NH);
        qknorm_backward(dqkv.data(), qkv.data(), rstd.data(), B, T, C, NH);
        Vec ref = to_double(qkv0), rrstd(rstd.size()), rd = to_double(dqkv0);
        qknorm_forward_twin(ref.data(), rrstd.data(), B, T, C, NH);
        qknorm_backward_twin(rd.data(), ref.data(), rrstd.data(), B, T, C, NH);
        const double e_out = scaled_error(qkv, ref), e_rstd = scaled_error(rstd, rrstd),
                     e_d = scaled_error(dqkv, rd, max_abs(rstd) * max_abs(dqkv0));
        INFO("scaled errors: out " << e_out << " rstd " << e_rstd << " dqkv " << e_d);
        CHECK(e_out <= kVsDouble);
        CHECK(e_rstd <= kVsDouble);
        CHECK(e_d <= kVsDouble);
    }
}

#ifdef _OPENMP
TEST_CASE("RMSNorm and QK-norm give bit-identical results with 1, 2 and 3 threads",
          "[layers][rmsnorm][qknorm]") {
    const int N = 64, C = 771;  // N·C > the parallel threshold; C not a multiple of 64
    const size_t n = size_t(N) * C;
    const Floats x = randn<float>(n, 61, 2.0), w = randn<float>(C, 62), dout = randn<float>(n, 63);
    const int B = 4, T = 32, Cq = 384, NH = 6;
    const Floats qkv0 = randn<float>(size_t(B) * T * 3 * Cq, 64),
                 dqkv0 = randn<float>(qkv0.size(), 65);
    auto run = [&] {
        Floats out(n), rstd(N), dinp(n, 0.0f), dw(C, 0.0f);
        rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C);
        rmsnorm_backward(dinp.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), N,
                         C);
        Floats qkv = qkv0, qrstd(size_t(B) * T * 2 * NH), dqkv = dqkv0;
        qknorm_forward(qkv.data(), qrstd.data(), B, T, Cq, NH);
        qknorm_backward(dqkv.data(), qkv.data(), qrstd.data(), B, T, Cq, NH);
        return std::vector<Floats>{out, rstd, dinp, dw, qkv, qrstd, dqkv};
    };
    check_same_bits_with_1_2_3_threads(run);
}
#endif

// ---- Contract and bad arguments -------------------------------------------------------------

TEST_CASE("RMSNorm backward adds into dinp and dweight; QK-norm's overwrites q, k and leaves v",
          "[layers][rmsnorm][qknorm]") {
    const int N = 6, C = 37;
    const size_t n = size_t(N) * C;
    const Floats x = randn<float>(n, 71), dout = randn<float>(n, 72), w = randn<float>(C, 73);
    Floats out(n), rstd(N);
    rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C);
    check_writes_and_adds("rmsnorm", {randn<float>(n, 74), randn<float>(C, 75)}, {true, true},
                          [&](auto& g) {
        rmsnorm_backward(g[0].data(), g[1].data(), dout.data(), x.data(), w.data(), rstd.data(),
                         N, C);
    });
    rmsnorm_forward(out.data(), rstd.data(), x.data(), nullptr, N, C);
    check_writes_and_adds("rmsnorm without gain", {randn<float>(n, 76)}, {true}, [&](auto& g) {
        rmsnorm_backward(g[0].data(), nullptr, dout.data(), x.data(), nullptr, rstd.data(), N, C);
    });

    // QK-norm runs in place: the result must equal the twin's from the same dqkv (whatever it
    // held before is consumed), the v third must keep its exact bits, and the forward must not
    // read its rstd buffer (NaN sentinels there change nothing).
    const int B = 2, T = 3, Cq = 8, NH = 2;
    Floats qkv = randn<float>(size_t(B) * T * 3 * Cq, 77), ref = qkv;
    Floats qrstd(size_t(B) * T * 2 * NH, NAN), rrstd(qrstd.size());
    qknorm_forward(qkv.data(), qrstd.data(), B, T, Cq, NH);
    qknorm_forward_twin(ref.data(), rrstd.data(), B, T, Cq, NH);
    CHECK(scaled_error(qkv, ref) <= kVsFloatTwin);
    const Floats d0 = randn<float>(qkv.size(), 78);
    Floats d = d0, rd = d0;
    qknorm_backward(d.data(), qkv.data(), qrstd.data(), B, T, Cq, NH);
    qknorm_backward_twin(rd.data(), ref.data(), rrstd.data(), B, T, Cq, NH);
    CHECK(scaled_error(d, rd, max_abs(qrstd) * max_abs(d0)) <= kVsFloatTwin);
    for (size_t bt = 0; bt < size_t(B) * T; bt++)
        for (int c = 2 * Cq; c < 3 * Cq; c++) REQUIRE(d[bt * 3 * Cq + c] == d0[bt * 3 * Cq + c]);
}

TEST_CASE("RMSNorm and QK-norm: bad sizes are hg::Error", "[layers][rmsnorm][qknorm]") {
    Floats a(64, 1.0f), b(64, 1.0f), c(64, 1.0f);
    float* p = a.data();
    const float* q = b.data();
    CHECK_THROWS_WITH(rmsnorm_forward(p, c.data(), q, q, 2, -3), Catch::Contains("C = -3"));
    CHECK_THROWS_AS(rmsnorm_forward(p, c.data(), q, nullptr, 0, 4), hg::Error);
    CHECK_THROWS_AS(rmsnorm_backward(p, c.data(), q, q, q, q, -1, 4), hg::Error);
    CHECK_THROWS_WITH(rmsnorm_backward(p, c.data(), q, q, nullptr, q, 2, 4),
                      Catch::Contains("dweight given for a norm without gain"));
    CHECK_THROWS_AS(rmsnorm_forward_twin(p, c.data(), q, q, 0, 4), hg::Error);
    CHECK_THROWS_WITH(qknorm_forward(p, c.data(), 1, 2, 6, 4),
                      Catch::Contains("divisible by n_head"));
    CHECK_THROWS_AS(qknorm_forward(p, c.data(), 0, 2, 4, 2), hg::Error);
    CHECK_THROWS_AS(qknorm_backward(p, q, q, 1, 2, 4, 0), hg::Error);
    CHECK_THROWS_AS(qknorm_backward_twin(p, q, q, 0, 2, 4, 2), hg::Error);
}

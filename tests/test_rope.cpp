// test_rope.cpp — rotary position embeddings in the qkv buffer, alone and with QK-norm and the
// attention after them:
//   [gradcheck]  dqkv against central differences in double on the scalar twins (tiny odd
//                T and NH, head sizes 2 to 8, bases 10 and 10000, input scales 0.1 to 10); the
//                chain rope → QK-norm → attention in the order the block runs it; planted bugs
//                (the rotation instead of its transpose, the other pairing, the norm's and the
//                rotation's backwards in the wrong order) the same checks must reject
//   properties   the table by hand; norms kept; scores depend on t - s only; rotating and
//                normalising commute
//   [simd]       the fast path bit-identical to the float twin on every SIMD target (plain
//                multiplies and adds in the same order), head sizes 2 .. 2000; within float
//                rounding of the double twin (max error / max |ref| <= 1e-6, measured 1.2e-7
//                with the float table); the same bits with 1, 2 and 3 threads
//   contract     in place: v keeps its bits, backward ∘ forward is the identity to rounding;
//                bad sizes are hg::Error
#include "tests/catch.h"

#include <cmath>
#include <vector>

#include "lib/core/errors.h"
#include "lib/layers/attention.h"
#include "lib/layers/qknorm.h"
#include "lib/layers/rope.h"
#include "tests/gradcheck.h"
#include "tests/layer_checks.h"

using namespace hg;
using namespace hg::test;
using Vec = std::vector<double>;
using Floats = std::vector<float>;

namespace {

const size_t kLengths[] = {1, 5, 7, 33, 127, 1000};  // pairs per head, h = hs/2

struct Table {
    std::vector<double> cos, sin;
    Table(int maxT, int hs, double base) : cos(size_t(maxT) * hs / 2), sin(cos.size()) {
        rope_table(cos.data(), sin.data(), maxT, hs, base);
    }
};

struct RopeCase {
    int B, T, C, NH;
    Table tab;
    Vec qkv, r;
    RopeCase(int B_, int T_, int C_, int NH_, double base, double scale, uint64_t seed)
        : B(B_), T(T_), C(C_), NH(NH_), tab(T_, C_ / NH_, base),
          qkv(randn(size_t(B_) * T_ * 3 * C_, seed, scale)), r(randn(qkv.size(), seed + 1)) {}
    Vec rotated() const {
        Vec out = qkv;
        rope_forward_twin(out.data(), tab.cos.data(), tab.sin.data(), B, T, C, NH);
        return out;
    }
    double loss() const { return dot(r, rotated().data()); }
    Vec backward(Vec d) const {
        rope_backward_twin(d.data(), tab.cos.data(), tab.sin.data(), B, T, C, NH);
        return d;
    }
};

// The rotation with neighbouring pairs (2i, 2i+1) and the same angles: the other convention.
void rope_interleaved(Vec& qkv, const Table& tab, int B, int T, int C, int NH, double sign) {
    const int h = C / NH / 2;
    for (int bt = 0; bt < B * T; bt++)
        for (int j = 0; j < 2 * NH; j++)
            for (int i = 0; i < h; i++) {
                double* x = qkv.data() + size_t(bt) * 3 * C + size_t(j) * 2 * h + 2 * i;
                const size_t at = size_t(bt % T) * h + i;
                const double c = tab.cos[at], s = sign * tab.sin[at];
                const double x1 = x[0], x2 = x[1];
                x[0] = x1 * c - x2 * s, x[1] = x2 * c + x1 * s;
            }
}

}  // namespace

// ---- The table ------------------------------------------------------------------------------

TEST_CASE("rope_table: values by hand", "[layers][rope]") {
    SECTION("t = 0: no rotation") {
        Table tab(3, 6, kRopeBase);
        for (int i = 0; i < 3; i++) CHECK((tab.cos[i] == 1.0 && tab.sin[i] == 0.0));
    }
    SECTION("hs = 4, base 10000: frequencies 1 and 10000^(-1/2) = 0.01") {
        Table tab(3, 4, kRopeBase);
        CHECK(tab.cos[1 * 2 + 0] == Approx(0.5403023058681398).epsilon(1e-15));    // cos 1
        CHECK(tab.sin[1 * 2 + 0] == Approx(0.8414709848078965).epsilon(1e-15));    // sin 1
        CHECK(tab.cos[1 * 2 + 1] == Approx(0.9999500004166653).epsilon(1e-15));    // cos 0.01
        CHECK(tab.sin[1 * 2 + 1] == Approx(0.009999833334166664).epsilon(1e-15));  // sin 0.01
        CHECK(tab.sin[2 * 2 + 0] == Approx(0.9092974268256817).epsilon(1e-15));    // sin 2
        CHECK(tab.cos[2 * 2 + 1] == Approx(0.9998000066665778).epsilon(1e-15));    // cos 0.02
    }
    SECTION("hs = 6, base 10: frequency 10^(-2/3) = 0.21544347 for i = 2; the float table is the "
            "double one rounded") {
        Table tab(8, 6, 10.0);
        CHECK(tab.sin[7 * 3 + 2] == Approx(0.9980354973727412).epsilon(1e-14));  // sin(7 · 0.215)
        std::vector<float> c(8 * 3), s(8 * 3);
        rope_table(c.data(), s.data(), 8, 6, 10.0);
        for (size_t i = 0; i < c.size(); i++) {
            CHECK(c[i] == float(tab.cos[i]));
            CHECK(s[i] == float(tab.sin[i]));
        }
    }
}

// ---- Gradient checks ------------------------------------------------------------------------

TEST_CASE("RoPE backward matches finite differences (dqkv: q, k and v)",
          "[gradcheck][layers][rope]") {
    struct Shape { int B, T, C, NH; };
    for (Shape s : {Shape{2, 3, 6, 3}, Shape{1, 5, 12, 2}, Shape{2, 3, 8, 1}})
        for (double base : {10.0, kRopeBase})
            for (double scale : {0.1, 1.0, 10.0}) {
                CAPTURE(s.B, s.T, s.C, s.NH, base, scale);
                RopeCase k(s.B, s.T, s.C, s.NH, base, scale, 300 + s.C);
                Vec dqkv = k.backward(k.r);
                check_grad("dqkv", k.qkv, dqkv, [&] { return k.loss(); }, scale);
            }
}

TEST_CASE("RoPE: the checker rejects the rotation in place of its transpose, and the other "
          "pairing", "[gradcheck][layers][rope]") {
    RopeCase k(2, 3, 8, 2, 10.0, 1.0, 17);
    Vec same_sign = k.r;  // dx = R dy instead of Rᵀ dy
    rope_forward_twin(same_sign.data(), k.tab.cos.data(), k.tab.sin.data(), k.B, k.T, k.C, k.NH);
    check_grad_fails("dqkv, R instead of Rᵀ", k.qkv, same_sign, [&] { return k.loss(); });
    Vec interleaved = k.r;  // the transpose, but of the (2i, 2i+1) pairing
    rope_interleaved(interleaved, k.tab, k.B, k.T, k.C, k.NH, -1.0);
    check_grad_fails("dqkv, interleaved pairs", k.qkv, interleaved, [&] { return k.loss(); });
}

TEST_CASE("RoPE then QK-norm then attention: the chain's gradient, in the block's order",
          "[gradcheck][layers][rope][qknorm]") {
    const int B = 2, T = 3, C = 8, NH = 2;
    for (double scale : {0.1, 1.0, 3.0}) {
        CAPTURE(scale);
        RopeCase k(B, T, C, NH, 10.0, scale, 400);
        const size_t n_att = size_t(B) * NH * T * T;
        Vec rstd(size_t(B) * T * 2 * NH), att(n_att), scratch(n_att), out(size_t(B) * T * C);
        const Vec r_out = randn(out.size(), 401);
        auto forward = [&](Vec& qkv) {  // qkv ← qknorm(rope(qkv)), then attention
            rope_forward_twin(qkv.data(), k.tab.cos.data(), k.tab.sin.data(), B, T, C, NH);
            qknorm_forward_twin(qkv.data(), rstd.data(), B, T, C, NH);
            attention_forward_twin(out.data(), att.data(), scratch.data(), qkv.data(), B, T, C, NH,
                                   Dropout{});
        };
        auto loss = [&] {
            Vec qkv = k.qkv;
            forward(qkv);
            return dot(r_out, out.data());
        };
        Vec qkv = k.qkv;
        forward(qkv);  // qkv now holds the normalised, rotated q, k: what attention read
        Vec dqkv(qkv.size());
        attention_backward_twin(dqkv.data(), scratch.data(), r_out.data(), qkv.data(), att.data(),
                                B, T, C, NH, Dropout{});
        Vec wrong_order = dqkv;
        qknorm_backward_twin(dqkv.data(), qkv.data(), rstd.data(), B, T, C, NH);
        rope_backward_twin(dqkv.data(), k.tab.cos.data(), k.tab.sin.data(), B, T, C, NH);
        check_grad("dqkv through attention, QK-norm, RoPE", k.qkv, dqkv, loss, scale);
        // planted bug: un-rotating first hands the norm's backward a gradient in the other frame
        rope_backward_twin(wrong_order.data(), k.tab.cos.data(), k.tab.sin.data(), B, T, C, NH);
        qknorm_backward_twin(wrong_order.data(), qkv.data(), rstd.data(), B, T, C, NH);
        check_grad_fails("dqkv, backwards in the wrong order", k.qkv, wrong_order, loss, scale);
    }
}

// ---- Properties -----------------------------------------------------------------------------

TEST_CASE("RoPE keeps each head's norm, scores depend on t - s only, and rotating commutes with "
          "QK-norm", "[layers][rope][qknorm]") {
    const int B = 1, T = 7, C = 12, NH = 2, hs = C / NH;
    RopeCase k(B, T, C, NH, 10.0, 1.0, 500);
    // the same q and k vectors at every position: then q_t · k_s may depend on t - s alone
    for (int t = 1; t < T; t++)
        for (int c = 0; c < 3 * C; c++) k.qkv[size_t(t) * 3 * C + c] = k.qkv[c];
    const Vec y = k.rotated();
    for (int t = 0; t < T; t++)
        for (int j = 0; j < 2 * NH; j++) {
            double nx = 0, ny = 0;
            for (int i = 0; i < hs; i++) {
                const size_t at = size_t(t) * 3 * C + j * hs + i;
                nx += k.qkv[at] * k.qkv[at], ny += y[at] * y[at];
            }
            CHECK(ny == Approx(nx).epsilon(1e-14));
        }
    auto score = [&](int t, int s, int h) {
        double d = 0;
        const double* q_t = y.data() + size_t(t) * 3 * C + h * hs;
        const double* k_s = y.data() + size_t(s) * 3 * C + C + h * hs;
        for (int i = 0; i < hs; i++) d += q_t[i] * k_s[i];
        return d;
    };
    for (int h = 0; h < NH; h++)
        for (int t = 0; t + 1 < T; t++)
            for (int s = 0; s <= t; s++) {
                CAPTURE(h, t, s);
                CHECK(score(t + 1, s + 1, h) == Approx(score(t, s, h)).margin(1e-12));
            }
    CHECK(std::fabs(score(3, 0, 0) - score(1, 0, 0)) > 1e-3);  // and it does depend on t - s

    Vec norm_then_rope = k.qkv, rope_then_norm = k.qkv, rstd(size_t(B) * T * 2 * NH);
    qknorm_forward_twin(norm_then_rope.data(), rstd.data(), B, T, C, NH);
    rope_forward_twin(norm_then_rope.data(), k.tab.cos.data(), k.tab.sin.data(), B, T, C, NH);
    rope_forward_twin(rope_then_norm.data(), k.tab.cos.data(), k.tab.sin.data(), B, T, C, NH);
    qknorm_forward_twin(rope_then_norm.data(), rstd.data(), B, T, C, NH);
    for (size_t i = 0; i < k.qkv.size(); i++)
        CHECK(rope_then_norm[i] == Approx(norm_then_rope[i]).margin(1e-14));
}

// ---- Fast path ------------------------------------------------------------------------------

TEST_CASE("RoPE kernels are bit-identical to the float twin on every SIMD target",
          "[simd][layers][rope]") {
    for_each_target([&] {
        for (size_t h : kLengths) {
            const int B = 1, T = 3, NH = 2, C = NH * 2 * int(h);
            CAPTURE(h);
            Floats cos(size_t(T) * h), sin(cos.size());
            rope_table(cos.data(), sin.data(), T, 2 * int(h), 10.0);
            const Floats qkv0 = randn<float>(size_t(B) * T * 3 * C, 600 + h);
            Floats fast = qkv0, twin = qkv0;
            rope_forward(fast.data(), cos.data(), sin.data(), B, T, C, NH);
            rope_forward_twin(twin.data(), cos.data(), sin.data(), B, T, C, NH);
            CHECK(mismatches(fast, twin) == 0);
            rope_backward(fast.data(), cos.data(), sin.data(), B, T, C, NH);
            rope_backward_twin(twin.data(), cos.data(), sin.data(), B, T, C, NH);
            CHECK(mismatches(fast, twin) == 0);
        }
    });
}

TEST_CASE("RoPE fast path: within float rounding of the double twin, the same bits with 1, 2 "
          "and 3 threads", "[layers][rope]") {
    const int B = 4, T = 64, C = 384, NH = 6, hs = C / NH;
    Floats cos(size_t(T) * hs / 2), sin(cos.size());
    rope_table(cos.data(), sin.data(), T, hs, kRopeBase);
    const Floats qkv0 = randn<float>(size_t(B) * T * 3 * C, 700, 2.0);
    Floats fast = qkv0;
    rope_forward(fast.data(), cos.data(), sin.data(), B, T, C, NH);
    const Table tab(T, hs, kRopeBase);
    Vec ref = to_double(qkv0);
    rope_forward_twin(ref.data(), tab.cos.data(), tab.sin.data(), B, T, C, NH);
    // each output is two products and a sum of numbers of size |x|: a few float roundings
    const double e = scaled_error(fast, ref);
    INFO("scaled error vs double " << e);
    CHECK(e <= 1e-6);
#ifdef _OPENMP
    check_same_bits_with_1_2_3_threads([&] {
        Floats y = qkv0, d = qkv0;
        rope_forward(y.data(), cos.data(), sin.data(), B, T, C, NH);
        rope_backward(d.data(), cos.data(), sin.data(), B, T, C, NH);
        return std::vector<Floats>{y, d};
    });
#endif
}

TEST_CASE("RoPE in place: v keeps its bits, backward after forward gives the input back",
          "[layers][rope]") {
    const int B = 2, T = 5, C = 24, NH = 3;
    Floats cos(size_t(T) * C / NH / 2), sin(cos.size());
    rope_table(cos.data(), sin.data(), T, C / NH, kRopeBase);
    const Floats qkv0 = randn<float>(size_t(B) * T * 3 * C, 800);
    Floats x = qkv0;
    rope_forward(x.data(), cos.data(), sin.data(), B, T, C, NH);
    for (size_t bt = 0; bt < size_t(B) * T; bt++)
        for (int c = 2 * C; c < 3 * C; c++) REQUIRE(x[bt * 3 * C + c] == qkv0[bt * 3 * C + c]);
    CHECK(mismatches(x, qkv0) > 0);
    rope_backward(x.data(), cos.data(), sin.data(), B, T, C, NH);  // Rᵀ R = I to rounding
    CHECK(scaled_error(x, qkv0) <= 1e-6);
}

TEST_CASE("RoPE: bad sizes and bases are hg::Error", "[layers][rope]") {
    Floats a(256, 1.0f), c(64), s(64);
    CHECK_THROWS_WITH(rope_forward(a.data(), c.data(), s.data(), 1, 2, 6, 2),
                      Catch::Contains("even head size"));
    CHECK_THROWS_WITH(rope_backward(a.data(), c.data(), s.data(), 1, 2, 6, 4),
                      Catch::Contains("divisible by n_head"));
    CHECK_THROWS_AS(rope_forward(a.data(), c.data(), s.data(), 0, 2, 8, 2), hg::Error);
    CHECK_THROWS_AS(rope_backward(a.data(), c.data(), s.data(), 1, -1, 8, 2), hg::Error);
    CHECK_THROWS_AS(rope_forward_twin(a.data(), c.data(), s.data(), 1, 2, 10, 2), hg::Error);
    CHECK_THROWS_WITH(rope_table(c.data(), s.data(), 4, 5, kRopeBase), Catch::Contains("hs = 5"));
    CHECK_THROWS_AS(rope_table(c.data(), s.data(), 0, 4, kRopeBase), hg::Error);
    CHECK_THROWS_WITH(rope_table(c.data(), s.data(), 4, 4, 1.0), Catch::Contains("base"));
    CHECK_THROWS_AS(rope_table(c.data(), s.data(), 4, 4, -10.0), hg::Error);
    CHECK_THROWS_AS(rope_table(c.data(), s.data(), 4, 4, NAN), hg::Error);
    CHECK_THROWS_AS(rope_table(c.data(), s.data(), 4, 4, INFINITY), hg::Error);
}

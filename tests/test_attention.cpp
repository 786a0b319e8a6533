// test_attention.cpp — causal multi-head self-attention, all heads in one pass.
//
//   [gradcheck]  dqkv against central differences, in double on the scalar twin
//                (tests/gradcheck.h: rtol 1e-6, atol 1e-9), with and without dropout, tiny odd
//                shapes, several input scales, fixed seeds; and planted wrong backwards (no
//                causal mask, no softmax-Jacobian subtraction) that the same check must reject.
//   fast path    the float sgemm/Highway path against a transparent per-head loop and against
//                the double scalar twin (float tolerances documented at each check); causality
//                bit for bit; the backward never reads the masked upper triangle; large scores
//                stay finite.
#include "tests/catch.h"
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "lib/kernels/attention_kernels.h"
#include "lib/layers/attention.h"
#include "tests/gradcheck.h"
#include "tests/layer_checks.h"

using hg::Dropout;

// Working space for attention_forward's dropout (B·NH·T·T numbers; the tests' shapes are small).
template <typename real = float>
static real* attention_scratch() {
    static std::vector<real> scratch(1 << 20);
    return scratch.data();
}

using hg::test::all_finite;
using hg::test::dot;
using hg::test::gradcheck;
using hg::test::GradCheckResult;
using hg::test::randn;
using hg::test::to_double;
using hg::test::worst_ratio;

namespace {

struct AttnCase {
    int B, T, C, NH;
    float p;
    double scale;
    uint64_t seed;
};
const AttnCase kAttnCases[] = {
    {2, 3, 6, 2, 0.0f, 1.0, 31},  {2, 3, 6, 3, 0.0f, 1.0, 32},  {2, 3, 6, 2, 0.0f, 0.3, 33},
    {2, 3, 6, 3, 0.0f, 2.5, 34},  {2, 3, 6, 2, 0.25f, 1.0, 35}, {2, 3, 6, 3, 0.25f, 1.0, 36},
    {2, 3, 6, 3, 0.25f, 2.5, 37}, {1, 5, 6, 3, 0.25f, 1.0, 38}, {2, 4, 5, 1, 0.0f, 1.0, 39},
};
const uint64_t kDropKey = 0x5eed;

// A backward to plant: the same steps as the scalar twin but recomputing the probabilities,
// optionally with a bug, to prove the gradient check rejects it.
enum class AttnBug {
    None,           // correct: the check must pass
    NoMask,         // backward recomputes softmax over all T keys: gradient leaks to s > t
    NoSubtraction,  // softmax backward dS = A ⊙ dA, the "- Σ A dA" term dropped
};
void attention_backward_planted(double* dqkv, const double* dout, const double* qkv, int B, int T,
                                int C, int NH, AttnBug bug) {
    const int hs = C / NH;
    const size_t C3 = 3 * (size_t)C;
    const double scale = 1.0 / std::sqrt(double(hs));
    std::vector<double> A(T), dA(T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                auto at = [&](int pos, int which) {
                    return ((size_t)b * T + pos) * C3 + (size_t)which * C + (size_t)h * hs;
                };
                const int n = bug == AttnBug::NoMask ? T : t + 1;  // keys this row "sees"
                for (int s = 0; s < n; s++) {
                    double d = 0;
                    for (int i = 0; i < hs; i++) d += qkv[at(t, 0) + i] * qkv[at(s, 1) + i];
                    A[s] = d * scale;
                }
                hg::softmax_row_scalar(A.data(), A.data(), (size_t)n);
                const double* dout_t = dout + ((size_t)b * T + t) * C + (size_t)h * hs;
                double sum = 0;
                for (int s = 0; s < n; s++) {
                    double d = 0;
                    for (int i = 0; i < hs; i++) {
                        d += dout_t[i] * qkv[at(s, 2) + i];
                        dqkv[at(s, 2) + i] += A[s] * dout_t[i];
                    }
                    dA[s] = d;
                    sum += A[s] * d;
                }
                if (bug == AttnBug::NoSubtraction) sum = 0;
                for (int s = 0; s < n; s++) {
                    const double dS = A[s] * (dA[s] - sum);
                    for (int i = 0; i < hs; i++) {
                        dqkv[at(t, 0) + i] += dS * qkv[at(s, 1) + i] * scale;
                        dqkv[at(s, 1) + i] += dS * qkv[at(t, 0) + i] * scale;
                    }
                }
            }
}

// Runs the gradient check of dqkv for one case; bug != None uses the planted backward.
GradCheckResult attention_gradcheck(const AttnCase& ac, bool planted, AttnBug bug) {
    const int B = ac.B, T = ac.T, C = ac.C, NH = ac.NH;
    const Dropout drop{ac.p, kDropKey};
    auto qkv = randn((size_t)B * T * 3 * C, ac.seed, ac.scale);
    auto r = randn((size_t)B * T * C, ac.seed + 1000);
    std::vector<double> out((size_t)B * T * C), att((size_t)B * NH * T * T);
    auto loss = [&] {
        hg::attention_forward_twin(out.data(), att.data(), attention_scratch<double>(), qkv.data(), B, T, C,
                                   NH, drop);
        return dot(r, out.data());
    };
    loss();  // att at the unperturbed point, for the backward
    std::vector<double> dqkv(qkv.size()), scratch(att.size());
    if (planted)
        attention_backward_planted(dqkv.data(), r.data(), qkv.data(), B, T, C, NH, bug);
    else
        hg::attention_backward_twin(dqkv.data(), scratch.data(), r.data(), qkv.data(), att.data(),
                                    B, T, C, NH, drop);
    return gradcheck(qkv.data(), qkv.size(), dqkv.data(), loss);
}

}  // namespace

TEST_CASE("attention backward matches finite differences (dqkv)", "[gradcheck][attention]") {
    for (const AttnCase& ac : kAttnCases) {
        GradCheckResult res = attention_gradcheck(ac, false, AttnBug::None);
        INFO("B=" << ac.B << " T=" << ac.T << " C=" << ac.C << " NH=" << ac.NH << " p=" << ac.p
                  << " scale=" << ac.scale << ": " << res.str());
        CHECK(res.ok);
    }
}

TEST_CASE("attention gradient check rejects planted wrong backwards", "[gradcheck][attention]") {
    for (const AttnCase& ac : kAttnCases) {
        if (ac.p != 0.0f) continue;  // the planted backward has no dropout
        INFO("B=" << ac.B << " T=" << ac.T << " C=" << ac.C << " NH=" << ac.NH
                  << " scale=" << ac.scale);
        // The planted code without a bug passes, so a failure below is the bug's doing.
        GradCheckResult ok = attention_gradcheck(ac, true, AttnBug::None);
        INFO("correct planted: " << ok.str());
        CHECK(ok.ok);
        GradCheckResult no_mask = attention_gradcheck(ac, true, AttnBug::NoMask);
        INFO("without the causal mask: " << no_mask.str());
        CHECK_FALSE(no_mask.ok);
        GradCheckResult no_sub = attention_gradcheck(ac, true, AttnBug::NoSubtraction);
        INFO("without the Jacobian's subtraction: " << no_sub.str());
        CHECK_FALSE(no_sub.ok);
    }
}

namespace {

// A transparent per-head attention: for each (b, h) copy out that head's q, k, v, build the
// full (T,T) score matrix with -∞ above the diagonal, softmax each row with std::exp, apply
// dropout at index ((b·NH + h)·T + t)·T + s, multiply by v, and write the head's columns.
void attention_per_head(double* out, const double* qkv, int B, int T, int C, int NH, Dropout drop) {
    const int hs = C / NH;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            std::vector<double> q((size_t)T * hs), k((size_t)T * hs), v((size_t)T * hs);
            for (int t = 0; t < T; t++)
                for (int i = 0; i < hs; i++) {
                    const double* row = qkv + ((size_t)b * T + t) * 3 * C + (size_t)h * hs + i;
                    q[(size_t)t * hs + i] = row[0];
                    k[(size_t)t * hs + i] = row[C];
                    v[(size_t)t * hs + i] = row[2 * C];
                }
            std::vector<double> att((size_t)T * T);
            for (int t = 0; t < T; t++) {
                double* a = &att[(size_t)t * T];
                double maxval = -INFINITY, sum = 0;
                for (int s = 0; s < T; s++) {
                    double d = 0;
                    for (int i = 0; i < hs; i++) d += q[(size_t)t * hs + i] * k[(size_t)s * hs + i];
                    a[s] = s <= t ? d / std::sqrt(double(hs)) : -INFINITY;
                    maxval = std::max(maxval, a[s]);
                }
                for (int s = 0; s < T; s++) sum += (a[s] = std::exp(a[s] - maxval));
                for (int s = 0; s < T; s++) {
                    a[s] /= sum;
                    const size_t idx = (((size_t)b * NH + h) * T + t) * T + s;
                    if (drop.active()) a[s] = drop.keep(idx) ? a[s] / (1.0 - double(drop.p)) : 0.0;
                }
            }
            for (int t = 0; t < T; t++)
                for (int i = 0; i < hs; i++) {
                    double sum = 0;
                    for (int s = 0; s < T; s++)
                        sum += att[(size_t)t * T + s] * v[(size_t)s * hs + i];
                    out[((size_t)b * T + t) * C + (size_t)h * hs + i] = sum;  // concat heads
                }
        }
}

}  // namespace

TEST_CASE("attention: batched heads equal a per-head loop", "[attention]") {
    // T = 70 crosses the fast path's 64-row block; p = 0.25 checks the dropout index.
    struct Shape {
        int B, T, C, NH;
        float p;
    };
    for (Shape sh : {Shape{2, 3, 6, 3, 0.0f}, Shape{2, 70, 12, 3, 0.0f}, Shape{2, 70, 12, 4, 0.25f},
                     Shape{1, 9, 8, 1, 0.25f}}) {
        const int B = sh.B, T = sh.T, C = sh.C, NH = sh.NH;
        const Dropout drop{sh.p, kDropKey};
        auto qkv = randn<float>((size_t)B * T * 3 * C, 41);
        auto qkv_d = to_double(qkv);
        std::vector<double> ref((size_t)B * T * C), out_d(ref.size()),
            att_d((size_t)B * NH * T * T);
        std::vector<float> out(ref.size()), att(att_d.size());
        attention_per_head(ref.data(), qkv_d.data(), B, T, C, NH, drop);
        hg::attention_forward_twin(out_d.data(), att_d.data(), attention_scratch<double>(), qkv_d.data(), B,
                                   T, C, NH, drop);
        hg::attention_forward(out.data(), att.data(), attention_scratch(), qkv.data(), B, T, C, NH, drop);
        INFO("B=" << B << " T=" << T << " C=" << C << " NH=" << NH << " p=" << sh.p);
        CHECK(worst_ratio(out_d.data(), ref.data(), ref.size(), 1e-12, 1e-12) <= 1.0);  // double
        CHECK(worst_ratio(out.data(), ref.data(), ref.size(), 1e-5, 1e-5) <= 1.0);      // float
    }
}

TEST_CASE("attention is causal: changing position t leaves earlier outputs bit-identical",
          "[attention]") {
    const int B = 2, T = 70, C = 12, NH = 3;
    for (float p : {0.0f, 0.25f}) {
        const Dropout drop{p, kDropKey};
        auto qkv = randn<float>((size_t)B * T * 3 * C, 51);
        std::vector<float> out((size_t)B * T * C), att((size_t)B * NH * T * T);
        std::vector<double> qkv_d = to_double(qkv), out_d(out.size()), att_d(att.size());
        hg::attention_forward(out.data(), att.data(), attention_scratch(), qkv.data(), B, T, C, NH, drop);
        hg::attention_forward_twin(out_d.data(), att_d.data(), attention_scratch<double>(), qkv_d.data(), B,
                                   T, C, NH, drop);
        for (int t : {0, 1, 5, 63, 64, 69}) {
            auto qkv2 = qkv;
            for (int b = 0; b < B; b++)
                for (int j = 0; j < 3 * C; j++)
                    qkv2[((size_t)b * T + t) * 3 * C + j] += 0.5f + 0.01f * j;
            auto qkv2_d = to_double(qkv2);
            std::vector<float> out2(out.size()), att2(att.size());
            std::vector<double> out2_d(out.size()), att2_d(att.size());
            hg::attention_forward(out2.data(), att2.data(), attention_scratch(), qkv2.data(), B, T, C, NH, drop);
            hg::attention_forward_twin(out2_d.data(), att2_d.data(), attention_scratch<double>(),
                                       qkv2_d.data(), B, T, C, NH, drop);
            INFO("p=" << p << " changed position t=" << t);
            for (int b = 0; b < B; b++) {
                const size_t before = (size_t)t * C, row0 = (size_t)b * T * C;
                CHECK(std::memcmp(out.data() + row0, out2.data() + row0, before * sizeof(float)) ==
                      0);
                CHECK(std::memcmp(out_d.data() + row0, out2_d.data() + row0,
                                  before * sizeof(double)) == 0);
                // ... while position t itself does change (the test can fail)
                CHECK(std::memcmp(out.data() + row0 + before, out2.data() + row0 + before,
                                  C * sizeof(float)) != 0);
            }
        }
    }
}

TEST_CASE("attention fast float path matches the double scalar twin", "[attention]") {
    // Float tolerance 1e-5 + 1e-5·|ref| on out, att and dqkv (inputs N(0,1), hs = 12, T = 130:
    // three row blocks of the fast path; measured worst: 8% of that, on dqkv).
    // dqkv starts non-zero: the backward must overwrite it.
    const int B = 2, T = 130, C = 48, NH = 4;
    const double tol = 1e-5;
    for (float p : {0.0f, 0.25f}) {
        const Dropout drop{p, kDropKey};
        auto qkv = randn<float>((size_t)B * T * 3 * C, 61),
             dout = randn<float>((size_t)B * T * C, 62);
        auto dqkv = randn<float>(qkv.size(), 63);
        auto qkv_d = to_double(qkv), dout_d = to_double(dout), dqkv_d = to_double(dqkv);
        std::vector<float> out(dout.size()), att((size_t)B * NH * T * T, 7.0f),
            scratch(att.size(), 7.0f);
        std::vector<double> out_d(out.size()), att_d(att.size()), scratch_d(att.size());
        hg::attention_forward(out.data(), att.data(), attention_scratch(), qkv.data(), B, T, C, NH, drop);
        hg::attention_forward_twin(out_d.data(), att_d.data(), attention_scratch<double>(), qkv_d.data(), B,
                                   T, C, NH, drop);
        hg::attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), B,
                               T, C, NH, drop);
        hg::attention_backward_twin(dqkv_d.data(), scratch_d.data(), dout_d.data(), qkv_d.data(),
                                    att_d.data(), B, T, C, NH, drop);
        INFO("p=" << p);
        CHECK(worst_ratio(out.data(), out_d.data(), out.size(), tol, tol) <= 1.0);
        CHECK(worst_ratio(att.data(), att_d.data(), att.size(), tol, tol) <=
              1.0);  // incl. zeros above
        CHECK(worst_ratio(dqkv.data(), dqkv_d.data(), dqkv.size(), tol, tol) <= 1.0);
    }
}

// Both fast paths (fused kernels, sgemm blocks) against the double twin, on every SIMD target.
// Float tolerance 1e-5 + 1e-5·|ref| as above; the shapes cover hs = 16, 32, 64 and 128, T below,
// at and past the fused kernels' 64-key tiles, with and without dropout.
TEST_CASE("attention: fused kernels and sgemm blocks both match the double twin on every target",
          "[attention][simd]") {
    struct Shape { int B, T, C, NH; };
    const double tol = 1e-5;
    for (const Shape& sh : {Shape{2, 7, 32, 2}, Shape{1, 64, 64, 2}, Shape{2, 70, 128, 4},
                            Shape{1, 130, 192, 3}, Shape{1, 33, 128, 1}}) {
        const int B = sh.B, T = sh.T, C = sh.C, NH = sh.NH;
        REQUIRE(hg::attention_fused_fits(T, C / NH));
        for (float p : {0.0f, 0.25f}) {
            const Dropout drop{p, kDropKey};
            const auto qkv = randn<float>((size_t)B * T * 3 * C, 161 + T), dout = randn<float>((size_t)B * T * C, 162);
            const auto qkv_d = to_double(qkv), dout_d = to_double(dout);
            std::vector<double> out_d(dout.size()), att_d((size_t)B * NH * T * T), dqkv_d(qkv.size()),
                scratch_d(att_d.size());
            hg::attention_forward_twin(out_d.data(), att_d.data(), scratch_d.data(), qkv_d.data(), B, T, C, NH,
                                       drop);
            hg::attention_backward_twin(dqkv_d.data(), scratch_d.data(), dout_d.data(), qkv_d.data(),
                                        att_d.data(), B, T, C, NH, drop);
            hg::test::for_each_target([&] {
                for (bool fused : {true, false}) {
                    INFO("B " << B << " T " << T << " C " << C << " NH " << NH << " p " << p
                              << (fused ? " fused" : " sgemm"));
                    std::vector<float> out(dout.size(), 7.0f), att(att_d.size(), 7.0f), scratch(att.size(), 7.0f);
                    std::vector<float> dqkv(qkv.size(), 7.0f);  // written, not added to
                    (fused ? hg::attention_forward_fused : hg::attention_forward_sgemm)(
                        out.data(), att.data(), scratch.data(), qkv.data(), B, T, C, NH, drop);
                    (fused ? hg::attention_backward_fused : hg::attention_backward_sgemm)(
                        dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH, drop);
                    CHECK(worst_ratio(out.data(), out_d.data(), out.size(), tol, tol) <= 1.0);
                    CHECK(worst_ratio(att.data(), att_d.data(), att.size(), tol, tol) <= 1.0);
                    CHECK(worst_ratio(dqkv.data(), dqkv_d.data(), dqkv.size(), tol, tol) <= 1.0);
                }
            });
        }
    }
}

// The comparison above can fail: the fused backward given a wrong mask (another dropout key) or
// probabilities of other scores (att of a perturbed qkv) is far outside its tolerance.
TEST_CASE("attention: the fused-vs-twin comparison rejects a wrong backward", "[attention]") {
    const int B = 1, T = 70, C = 64, NH = 2;
    const Dropout drop{0.25f, kDropKey}, other{0.25f, kDropKey + 1};
    const auto qkv = randn<float>((size_t)B * T * 3 * C, 171), dout = randn<float>((size_t)B * T * C, 172);
    const auto qkv_d = to_double(qkv), dout_d = to_double(dout);
    std::vector<double> out_d(dout.size()), att_d((size_t)B * NH * T * T), dqkv_d(qkv.size()), scratch_d(att_d.size());
    hg::attention_forward_twin(out_d.data(), att_d.data(), scratch_d.data(), qkv_d.data(), B, T, C, NH, drop);
    hg::attention_backward_twin(dqkv_d.data(), scratch_d.data(), dout_d.data(), qkv_d.data(), att_d.data(), B, T,
                                C, NH, drop);
    std::vector<float> out(dout.size()), att(att_d.size()), scratch(att.size()), dqkv(qkv.size());
    hg::attention_forward_fused(out.data(), att.data(), scratch.data(), qkv.data(), B, T, C, NH, drop);
    hg::attention_backward_fused(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH, drop);
    CHECK(worst_ratio(dqkv.data(), dqkv_d.data(), dqkv.size(), 1e-5, 1e-5) <= 1.0);  // the right one passes
    hg::attention_backward_fused(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH, other);
    CHECK(worst_ratio(dqkv.data(), dqkv_d.data(), dqkv.size(), 1e-5, 1e-5) > 100.0);
    auto qkv2 = qkv;
    qkv2[5] += 0.5f;  // a query of position 0, head 0: row 0 of att is 1 anyway; row-1 keys see it
    qkv2[(size_t)3 * C + C + 5] += 0.5f;  // a key of position 1: every later row of head 0 changes
    std::vector<float> att2(att.size());
    hg::attention_forward_fused(out.data(), att2.data(), scratch.data(), qkv2.data(), B, T, C, NH, drop);
    hg::attention_backward_fused(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att2.data(), B, T, C, NH, drop);
    CHECK(worst_ratio(dqkv.data(), dqkv_d.data(), dqkv.size(), 1e-5, 1e-5) > 100.0);
}

TEST_CASE("attention backward never reads the upper triangle of att", "[attention]") {
    const int B = 1, T = 7, C = 6, NH = 2;
    auto qkv = randn<float>((size_t)B * T * 3 * C, 71), dout = randn<float>((size_t)B * T * C, 72);
    std::vector<float> out(dout.size()), att((size_t)B * NH * T * T), scratch(att.size());
    hg::attention_forward(out.data(), att.data(), attention_scratch(), qkv.data(), B, T, C, NH, Dropout{});
    std::vector<float> dqkv1(qkv.size()), dqkv2(qkv.size());
    hg::attention_backward(dqkv1.data(), scratch.data(), dout.data(), qkv.data(), att.data(), B, T,
                           C, NH, Dropout{});
    for (int bh = 0; bh < B * NH; bh++)
        for (int t = 0; t < T; t++)
            for (int s = t + 1; s < T; s++) att[((size_t)bh * T + t) * T + s] = NAN;
    hg::attention_backward(dqkv2.data(), scratch.data(), dout.data(), qkv.data(), att.data(), B, T,
                           C, NH, Dropout{});
    CHECK(std::memcmp(dqkv1.data(), dqkv2.data(), dqkv1.size() * sizeof(float)) == 0);
}

TEST_CASE("attention with large scores stays finite", "[attention]") {
    // qkv of magnitude ~100: scores ~1e4·√hs/hs, far beyond exp's float range unless the
    // row max is subtracted.
    const int B = 2, T = 9, C = 8, NH = 2;
    auto qkv = randn<float>((size_t)B * T * 3 * C, 91, 100.0);
    auto dout = randn<float>((size_t)B * T * C, 92);
    std::vector<float> out(dout.size()), att((size_t)B * NH * T * T), scratch(att.size()),
        dqkv(qkv.size());
    hg::attention_forward(out.data(), att.data(), attention_scratch(), qkv.data(), B, T, C, NH, Dropout{});
    hg::attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), B, T,
                           C, NH, Dropout{});
    CHECK(all_finite(out.data(), out.size()));
    CHECK(all_finite(att.data(), att.size()));
    CHECK(all_finite(dqkv.data(), dqkv.size()));
    for (int bh = 0; bh < B * NH; bh++)
        for (int t = 0; t < T; t++) {
            double sum = 0;
            for (int s = 0; s < T; s++) sum += att[((size_t)bh * T + t) * T + s];
            CHECK(sum == Approx(1.0).epsilon(1e-5));
        }
}

// test_layers_b.cpp — linear, causal multi-head attention, softmax cross-entropy.
//
//   [gradcheck]  every input and parameter gradient of each layer against central differences,
//                in double on the scalar twins (tests/gradcheck.h, default tolerances
//                rtol 1e-6, atol 1e-9), tiny odd shapes, several input scales, fixed seeds;
//                and planted wrong backwards that the same checks must reject.
//   fast path    the float sgemm/Highway path against the double scalar twin (float tolerances
//                documented at each check), a transparent per-head attention, causality,
//                thread-count independence, numerical stability, bad arguments.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "lib/errors.h"
#include "lib/layers/attention.h"
#include "lib/layers/crossentropy.h"
#include "lib/layers/linear.h"
#include "tests/gradcheck.h"

using hg::Dropout;

// Working space for attention_forward's dropout (B·NH·T·T floats; the tests' shapes are small).
static float* attention_scratch() {
    static std::vector<float> scratch(1 << 20);
    return scratch.data();
}
using hg::test::dot;
using hg::test::gradcheck;
using hg::test::GradCheckResult;
using hg::test::randn;

namespace {

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// max over i of |got_i - want_i| / (atol + rtol·|want_i|): <= 1 means every entry is within
// tolerance. NaN anywhere gives NaN (which fails a <= 1 check).
template <typename A, typename B>
double worst_ratio(const A* got, const B* want, size_t n, double atol, double rtol) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double r = std::fabs(double(got[i]) - double(want[i])) /
                   (atol + rtol * std::fabs(double(want[i])));
        if (!(r <= worst)) worst = r;
    }
    return worst;
}

bool all_finite(const float* x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!std::isfinite(x[i])) return false;
    return true;
}

// ---------------------------------------------------------------------------------------------
// linear

struct LinearCase {
    int N, C, OC;
    bool bias;
    double scale;
    uint64_t seed;
};
const LinearCase kLinearCases[] = {
    {5, 7, 3, true, 1.0, 11},  {5, 7, 3, false, 1.0, 12}, {5, 7, 3, true, 0.1, 13},
    {5, 7, 3, false, 4.0, 14}, {5, 7, 3, true, 4.0, 15},  {1, 1, 1, true, 1.0, 16},
};

enum class Wrt { Inp, Weight, Bias };

void check_linear_gradient(Wrt wrt) {
    for (const LinearCase& lc : kLinearCases) {
        if (wrt == Wrt::Bias && !lc.bias) continue;
        const int N = lc.N, C = lc.C, OC = lc.OC;
        auto inp = randn((size_t)N * C, lc.seed, lc.scale);
        auto weight = randn((size_t)OC * C, lc.seed + 100, lc.scale);
        auto bias = randn((size_t)OC, lc.seed + 200, lc.scale);
        auto r = randn((size_t)N * OC, lc.seed + 300);
        const double* b = lc.bias ? bias.data() : nullptr;
        std::vector<double> out((size_t)N * OC);
        auto loss = [&] {
            hg::linear_forward_scalar(out.data(), inp.data(), weight.data(), b, N, C, OC);
            return dot(r, out.data());
        };
        // dL/dout = r for L = sum(r ⊙ out)
        std::vector<double> dinp(inp.size()), dweight(weight.size()), dbias(bias.size());
        hg::linear_backward_scalar(dinp.data(), dweight.data(), lc.bias ? dbias.data() : nullptr,
                                   r.data(), inp.data(), weight.data(), N, C, OC);
        GradCheckResult res = wrt == Wrt::Inp ? gradcheck(inp.data(), inp.size(), dinp.data(), loss)
                              : wrt == Wrt::Weight
                                  ? gradcheck(weight.data(), weight.size(), dweight.data(), loss)
                                  : gradcheck(bias.data(), bias.size(), dbias.data(), loss);
        INFO("N=" << N << " C=" << C << " OC=" << OC << " bias=" << lc.bias << " scale=" << lc.scale
                  << ": " << res.str());
        CHECK(res.ok);
    }
}

}  // namespace

TEST_CASE("linear backward matches finite differences (dinp)", "[gradcheck][linear]") {
    check_linear_gradient(Wrt::Inp);
}
TEST_CASE("linear backward matches finite differences (dweight)", "[gradcheck][linear]") {
    check_linear_gradient(Wrt::Weight);
}
TEST_CASE("linear backward matches finite differences (dbias)", "[gradcheck][linear]") {
    check_linear_gradient(Wrt::Bias);
}

TEST_CASE("linear fast float path matches the double scalar twin", "[linear]") {
    // Float tolerance: sums of C = 70 products of N(0,1) numbers, each entry within
    // 1e-5 + 1e-5·|ref| (measured worst: 25% of that, on out).
    const double tol = 1e-5;
    for (bool with_bias : {true, false}) {
        const int N = 37, C = 70, OC = 45;
        auto inp = randn<float>((size_t)N * C, 21), weight = randn<float>((size_t)OC * C, 22);
        auto bias = randn<float>(OC, 23), dout = randn<float>((size_t)N * OC, 24);
        auto inp_d = to_double(inp), weight_d = to_double(weight), bias_d = to_double(bias),
             dout_d = to_double(dout);
        // Gradients start non-zero: dweight, dbias must be added to and dinp overwritten.
        auto dinp = randn<float>(inp.size(), 25), dweight = randn<float>(weight.size(), 26),
             dbias = randn<float>(bias.size(), 27);
        auto dinp_d = to_double(dinp), dweight_d = to_double(dweight), dbias_d = to_double(dbias);
        std::vector<float> out((size_t)N * OC, 99.0f);
        std::vector<double> out_d((size_t)N * OC);

        hg::linear_forward(out.data(), inp.data(), weight.data(), with_bias ? bias.data() : nullptr,
                           N, C, OC);
        hg::linear_forward_scalar(out_d.data(), inp_d.data(), weight_d.data(),
                                  with_bias ? bias_d.data() : nullptr, N, C, OC);
        hg::linear_backward(dinp.data(), dweight.data(), with_bias ? dbias.data() : nullptr,
                            dout.data(), inp.data(), weight.data(), N, C, OC);
        hg::linear_backward_scalar(dinp_d.data(), dweight_d.data(),
                                   with_bias ? dbias_d.data() : nullptr, dout_d.data(),
                                   inp_d.data(), weight_d.data(), N, C, OC);
        INFO("bias=" << with_bias);
        CHECK(worst_ratio(out.data(), out_d.data(), out.size(), tol, tol) <= 1.0);
        CHECK(worst_ratio(dinp.data(), dinp_d.data(), dinp.size(), tol, tol) <= 1.0);
        CHECK(worst_ratio(dweight.data(), dweight_d.data(), dweight.size(), tol, tol) <= 1.0);
        CHECK(worst_ratio(dbias.data(), dbias_d.data(), dbias.size(), tol, tol) <= 1.0);
    }
    SECTION("dinp = null skips the input gradient") {
        const int N = 4, C = 3, OC = 2;
        auto inp = randn<float>(N * C, 1), weight = randn<float>(OC * C, 2),
             dout = randn<float>(N * OC, 3);
        std::vector<float> dweight(OC * C), dweight_ref(OC * C);
        std::vector<double> dw_d(OC * C), dinp_d(N * C);
        hg::linear_backward(nullptr, dweight.data(), nullptr, dout.data(), inp.data(),
                            weight.data(), N, C, OC);
        auto inp_d = to_double(inp), weight_d = to_double(weight), dout_d = to_double(dout);
        hg::linear_backward_scalar<double>(nullptr, dw_d.data(), nullptr, dout_d.data(),
                                           inp_d.data(), weight_d.data(), N, C, OC);
        CHECK(worst_ratio(dweight.data(), dw_d.data(), dweight.size(), 1e-6, 1e-6) <= 1.0);
    }
}

// ---------------------------------------------------------------------------------------------
// attention

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
        hg::attention_forward_scalar(out.data(), att.data(), qkv.data(), B, T, C, NH, drop);
        return dot(r, out.data());
    };
    loss();  // att at the unperturbed point, for the backward
    std::vector<double> dqkv(qkv.size()), scratch(att.size());
    if (planted)
        attention_backward_planted(dqkv.data(), r.data(), qkv.data(), B, T, C, NH, bug);
    else
        hg::attention_backward_scalar(dqkv.data(), scratch.data(), r.data(), qkv.data(), att.data(),
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
        hg::attention_forward_scalar(out_d.data(), att_d.data(), qkv_d.data(), B, T, C, NH, drop);
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
        hg::attention_forward_scalar(out_d.data(), att_d.data(), qkv_d.data(), B, T, C, NH, drop);
        for (int t : {0, 1, 5, 63, 64, 69}) {
            auto qkv2 = qkv;
            for (int b = 0; b < B; b++)
                for (int j = 0; j < 3 * C; j++)
                    qkv2[((size_t)b * T + t) * 3 * C + j] += 0.5f + 0.01f * j;
            auto qkv2_d = to_double(qkv2);
            std::vector<float> out2(out.size()), att2(att.size());
            std::vector<double> out2_d(out.size()), att2_d(att.size());
            hg::attention_forward(out2.data(), att2.data(), attention_scratch(), qkv2.data(), B, T, C, NH, drop);
            hg::attention_forward_scalar(out2_d.data(), att2_d.data(), qkv2_d.data(), B, T, C, NH,
                                         drop);
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
        hg::attention_forward_scalar(out_d.data(), att_d.data(), qkv_d.data(), B, T, C, NH, drop);
        hg::attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), B,
                               T, C, NH, drop);
        hg::attention_backward_scalar(dqkv_d.data(), scratch_d.data(), dout_d.data(), qkv_d.data(),
                                      att_d.data(), B, T, C, NH, drop);
        INFO("p=" << p);
        CHECK(worst_ratio(out.data(), out_d.data(), out.size(), tol, tol) <= 1.0);
        CHECK(worst_ratio(att.data(), att_d.data(), att.size(), tol, tol) <=
              1.0);  // incl. zeros above
        CHECK(worst_ratio(dqkv.data(), dqkv_d.data(), dqkv.size(), tol, tol) <= 1.0);
    }
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

#ifdef _OPENMP
TEST_CASE("results do not depend on the thread count (1 vs 2 threads)",
          "[linear][attention][crossentropy]") {
    // Sizes above the parallel thresholds (N·V and N·OC > 2^18), so 2 threads really split.
    // Exception: OpenBLAS's own multi-threaded sgemm (linear's three products) changes the
    // last bits of some entries between 1 and 2 threads (measured: ~4% of out, up to 5.7e-6
    // on values ~10), so those are compared within a float tolerance across thread counts and
    // bit for bit between two runs with the same count. Everything handgrad reduces itself (attention
    // per head, cross-entropy, linear's dbias) must be bit-identical.
    const int B = 2, T = 66, C = 16, NH = 2, V = 300, N = 1000, LC = 32, OC = 500;
    const Dropout drop{0.1f, kDropKey};
    auto qkv = randn<float>((size_t)B * T * 3 * C, 81), dout = randn<float>((size_t)B * T * C, 82);
    auto logits = randn<float>((size_t)N * V, 83, 3.0);
    auto inp = randn<float>((size_t)N * LC, 84), weight = randn<float>((size_t)OC * LC, 85);
    auto bias = randn<float>(OC, 86), dlin = randn<float>((size_t)N * OC, 87);
    std::vector<int> targets(N);
    for (int n = 0; n < N; n++) targets[n] = n % 7 == 0 ? -1 : (n * 37) % V;
    struct Run {
        std::vector<float> out, dqkv, probs, losses, dlogits, lin, dinp, dweight, dbias;
        double loss;
    };
    auto run = [&](int threads) {
        const int saved = omp_get_max_threads();
        omp_set_num_threads(threads);
        Run r;
        r.out.resize(dout.size());
        std::vector<float> att((size_t)B * NH * T * T), scratch(att.size());
        r.dqkv.assign(qkv.size(), 0.0f);
        hg::attention_forward(r.out.data(), att.data(), attention_scratch(), qkv.data(), B, T, C, NH, drop);
        hg::attention_backward(r.dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(),
                               B, T, C, NH, drop);
        r.probs.resize(logits.size());
        r.losses.resize(N);
        r.dlogits.assign(logits.size(), 0.0f);
        r.loss = hg::crossentropy_forward(r.probs.data(), r.losses.data(), logits.data(),
                                          targets.data(), N, V);
        hg::crossentropy_backward(r.dlogits.data(), r.probs.data(), targets.data(), N, V, 1.0f);
        r.lin.resize(dlin.size());
        r.dinp.assign(inp.size(), 0.0f);
        r.dweight.assign(weight.size(), 0.0f);
        r.dbias.assign(bias.size(), 0.0f);
        hg::linear_forward(r.lin.data(), inp.data(), weight.data(), bias.data(), N, LC, OC);
        hg::linear_backward(r.dinp.data(), r.dweight.data(), r.dbias.data(), dlin.data(),
                            inp.data(), weight.data(), N, LC, OC);
        omp_set_num_threads(saved);
        return r;
    };
    Run one = run(1), two = run(2), again = run(2);
    CHECK(one.out == two.out);
    CHECK(one.dqkv == two.dqkv);
    CHECK(one.probs == two.probs);
    CHECK(one.dlogits == two.dlogits);
    CHECK(one.loss == two.loss);
    CHECK(one.dbias == two.dbias);
    // A sum of K products of N(0,1) numbers is ~√K in size: atol 1e-5·√K, rtol 1e-5.
    auto close = [](const std::vector<float>& a, const std::vector<float>& b, int K) {
        return worst_ratio(a.data(), b.data(), a.size(), 1e-5 * std::sqrt(double(K)), 1e-5);
    };
    CHECK(close(one.lin, two.lin, LC) <= 1.0);
    CHECK(close(one.dinp, two.dinp, OC) <= 1.0);
    CHECK(close(one.dweight, two.dweight, N) <= 1.0);
    CHECK(two.lin == again.lin);
    CHECK(two.dinp == again.dinp);
    CHECK(two.dweight == again.dweight);
}
#endif

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

// ---------------------------------------------------------------------------------------------
// cross-entropy

namespace {

struct CeCase {
    int N, V;
    double scale;
    uint64_t seed;
};
const CeCase kCeCases[] = {
    {5, 7, 1.0, 101}, {5, 7, 0.1, 102}, {5, 7, 4.0, 103}, {3, 1, 1.0, 104}, {6, 11, 1.0, 105}};

std::vector<int> ce_targets(int N, int V, uint64_t seed) {
    hg::Rng rng(seed);
    std::vector<int> t(N);
    for (int n = 0; n < N; n++) t[n] = (int)rng.below((uint64_t)V);
    if (N > 1) t[1] = -1;  // every case includes an ignored row
    return t;
}

enum class CeBug { None, NoOnehot, NoMean };

GradCheckResult ce_gradcheck(const CeCase& cc, double dloss, CeBug bug) {
    const int N = cc.N, V = cc.V;
    auto logits = randn((size_t)N * V, cc.seed, cc.scale);
    auto targets = ce_targets(N, V, cc.seed + 7);
    std::vector<double> probs(logits.size()), losses(N);
    // the loss is the layer's own scalar output, scaled by dloss
    auto loss = [&] {
        return dloss * hg::crossentropy_forward_scalar(probs.data(), losses.data(), logits.data(),
                                                       targets.data(), N, V);
    };
    loss();
    std::vector<double> dlogits(logits.size());
    hg::crossentropy_backward_scalar(dlogits.data(), probs.data(), targets.data(), N, V, dloss);
    if (bug != CeBug::None) {  // planted: undo the -onehot, or the 1/K
        int count = 0;
        for (int y : targets) count += (y != -1);
        for (int n = 0; n < N; n++) {
            if (targets[n] == -1) continue;
            if (bug == CeBug::NoOnehot) dlogits[(size_t)n * V + targets[n]] += dloss / count;
            if (bug == CeBug::NoMean)
                for (int i = 0; i < V; i++) dlogits[(size_t)n * V + i] *= count;
        }
    }
    return gradcheck(logits.data(), logits.size(), dlogits.data(), loss);
}

}  // namespace

TEST_CASE("cross-entropy backward matches finite differences (dlogits)",
          "[gradcheck][crossentropy]") {
    for (double dloss : {1.0, 0.37})
        for (const CeCase& cc : kCeCases) {
            GradCheckResult res = ce_gradcheck(cc, dloss, CeBug::None);
            INFO("N=" << cc.N << " V=" << cc.V << " scale=" << cc.scale << " dloss=" << dloss
                      << ": " << res.str());
            CHECK(res.ok);
        }
}

TEST_CASE("cross-entropy gradient check rejects planted wrong backwards",
          "[gradcheck][crossentropy]") {
    for (const CeCase& cc : kCeCases) {
        if (cc.V == 1) continue;  // with one class p - onehot is 0 whatever the bug
        INFO("N=" << cc.N << " V=" << cc.V << " scale=" << cc.scale);
        CHECK_FALSE(ce_gradcheck(cc, 1.0, CeBug::NoOnehot).ok);
        CHECK_FALSE(ce_gradcheck(cc, 0.37, CeBug::NoMean).ok);
    }
}

TEST_CASE("cross-entropy fast float path matches the double scalar twin", "[crossentropy]") {
    // Float tolerance: probs and dlogits within 1e-6 + 1e-5·|ref|, losses within 1e-5·(1+|ref|),
    // the mean loss within 1e-6 relative (V = 1000, logits N(0, 3²); measured worst: 2% of
    // the tolerance).
    const int N = 33, V = 1000;
    auto logits = randn<float>((size_t)N * V, 111, 3.0);
    auto targets = ce_targets(N, V, 112);
    targets[7] = -1;
    auto logits_d = to_double(logits);
    std::vector<float> probs(logits.size()), losses(N);
    std::vector<double> probs_d(logits.size()), losses_d(N);
    auto dlogits = randn<float>(logits.size(), 113, 1e-3);  // non-zero: the backward overwrites
    auto dlogits_d = to_double(dlogits);
    double loss =
        hg::crossentropy_forward(probs.data(), losses.data(), logits.data(), targets.data(), N, V);
    double loss_d = hg::crossentropy_forward_scalar(probs_d.data(), losses_d.data(),
                                                    logits_d.data(), targets.data(), N, V);
    hg::crossentropy_backward(dlogits.data(), probs.data(), targets.data(), N, V, 0.37f);
    hg::crossentropy_backward_scalar(dlogits_d.data(), probs_d.data(), targets.data(), N, V, 0.37);
    CHECK(loss == Approx(loss_d).epsilon(1e-6));
    CHECK(losses[7] == 0.0f);
    CHECK(worst_ratio(losses.data(), losses_d.data(), losses.size(), 1e-5, 1e-5) <= 1.0);
    CHECK(worst_ratio(probs.data(), probs_d.data(), probs.size(), 1e-6, 1e-5) <= 1.0);
    CHECK(worst_ratio(dlogits.data(), dlogits_d.data(), dlogits.size(), 1e-6, 1e-5) <= 1.0);
    // the ignored row's gradient is written as 0
    CHECK(std::all_of(dlogits.begin() + 7 * V, dlogits.begin() + 8 * V, [](float g) { return g == 0.0f; }));
    // every target ignored: loss 0, no gradient
    std::vector<int> none(N, -1);
    CHECK(hg::crossentropy_forward(probs.data(), losses.data(), logits.data(), none.data(), N, V) ==
          0.0);
}

TEST_CASE("cross-entropy with logits of magnitude 1e4 gives finite loss and probs",
          "[crossentropy]") {
    const int N = 8, V = 65;
    auto logits = randn<float>((size_t)N * V, 121, 1e4);
    std::vector<int> targets(N);
    for (int n = 0; n < N; n++) {  // the least likely class: p underflows to 0 in float
        int arg = 0;
        for (int i = 1; i < V; i++)
            if (logits[(size_t)n * V + i] < logits[(size_t)n * V + arg]) arg = i;
        targets[n] = arg;
    }
    std::vector<float> probs(logits.size()), losses(N), dlogits(logits.size());
    auto logits_d = to_double(logits);
    std::vector<double> probs_d(logits.size()), losses_d(N);
    double loss =
        hg::crossentropy_forward(probs.data(), losses.data(), logits.data(), targets.data(), N, V);
    double loss_d = hg::crossentropy_forward_scalar(probs_d.data(), losses_d.data(),
                                                    logits_d.data(), targets.data(), N, V);
    hg::crossentropy_backward(dlogits.data(), probs.data(), targets.data(), N, V, 1.0f);
    CHECK(std::isfinite(loss));
    CHECK(loss > 1e3);  // -log p of the least likely class, p ~ exp(-(max - min))
    CHECK(loss == Approx(loss_d).epsilon(1e-6));
    CHECK(all_finite(probs.data(), probs.size()));
    CHECK(all_finite(losses.data(), losses.size()));
    CHECK(all_finite(dlogits.data(), dlogits.size()));
    for (int n = 0; n < N; n++) {
        double sum = 0;
        for (int i = 0; i < V; i++) sum += probs[(size_t)n * V + i];
        CHECK(sum == Approx(1.0).epsilon(1e-6));
    }
}

// ---------------------------------------------------------------------------------------------
// bad arguments

TEST_CASE("layers reject bad arguments with hg::Error", "[linear][attention][crossentropy]") {
    std::vector<float> buf(4096);
    float* f = buf.data();
    std::vector<double> dbuf(4096);
    double* d = dbuf.data();
    SECTION("attention: C not divisible by NH") {
        CHECK_THROWS_WITH(hg::attention_forward(f, f, f, f, 2, 3, 6, 4, Dropout{}),
                          "n_embd (C=6) must be divisible by n_head (4)");
        CHECK_THROWS_AS(hg::attention_backward(f, f, f, f, f, 2, 3, 6, 4, Dropout{}), hg::Error);
        CHECK_THROWS_AS(hg::attention_forward_scalar(d, d, d, 2, 3, 6, 4, Dropout{}), hg::Error);
        CHECK_THROWS_AS(hg::attention_backward_scalar(d, d, d, d, d, 2, 3, 6, 4, Dropout{}),
                        hg::Error);
    }
    SECTION("attention: zero or negative sizes, dropout p out of [0, 1)") {
        CHECK_THROWS_AS(hg::attention_forward(f, f, f, f, -1, 3, 6, 2, Dropout{}), hg::Error);
        CHECK_THROWS_AS(hg::attention_forward(f, f, f, f, 2, 0, 6, 2, Dropout{}), hg::Error);
        CHECK_THROWS_AS(hg::attention_forward(f, f, f, f, 2, 3, -6, 2, Dropout{}), hg::Error);
        CHECK_THROWS_WITH(hg::attention_forward(f, f, f, f, 2, 3, 6, 0, Dropout{}),
                          Catch::Contains("NH=0"));
        CHECK_THROWS_AS(hg::attention_backward(f, f, f, f, f, 2, -3, 6, 2, Dropout{}), hg::Error);
        CHECK_THROWS_AS(hg::attention_forward(f, f, f, f, 2, 3, 6, 2, Dropout{1.0f, 1}), hg::Error);
    }
    SECTION("linear: zero or negative sizes") {
        CHECK_THROWS_WITH(hg::linear_forward(f, f, f, nullptr, -1, 3, 2), Catch::Contains("N=-1"));
        CHECK_THROWS_AS(hg::linear_forward(f, f, f, f, 2, 0, 2), hg::Error);
        CHECK_THROWS_AS(hg::linear_backward(f, f, f, f, f, f, 2, 3, -2), hg::Error);
        CHECK_THROWS_AS(hg::linear_forward_scalar(d, d, d, d, 0, 3, 2), hg::Error);
    }
    SECTION("cross-entropy: target >= V, target < -1, bad sizes") {
        std::vector<int> targets = {0, 2, 7, 1};
        CHECK_THROWS_WITH(hg::crossentropy_forward(f, f, f, targets.data(), 4, 7),
                          "cross-entropy: target 7 at row 2 is outside [-1, V=7)");
        CHECK_THROWS_AS(hg::crossentropy_backward(f, f, targets.data(), 4, 7, 1.0f), hg::Error);
        CHECK_THROWS_AS(hg::crossentropy_forward_scalar(d, d, d, targets.data(), 4, 7), hg::Error);
        targets[2] = -2;
        CHECK_THROWS_WITH(hg::crossentropy_forward(f, f, f, targets.data(), 4, 7),
                          Catch::Contains("target -2"));
        targets[2] = 0;
        CHECK_NOTHROW(hg::crossentropy_forward(f, f, f, targets.data(), 4, 7));
        CHECK_THROWS_AS(hg::crossentropy_forward(f, f, f, targets.data(), 0, 7), hg::Error);
        CHECK_THROWS_AS(hg::crossentropy_forward(f, f, f, targets.data(), 4, -7), hg::Error);
    }
}

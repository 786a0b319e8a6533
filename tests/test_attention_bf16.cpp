// test_attention_bf16.cpp — attention with bf16 products (attention_forward_bf16 /
// attention_backward_bf16) against the exact attention of the same float inputs, entry by entry,
// within a bound derived from bf16's unit roundoff u = 2⁻⁸, float's ε = 2⁻²⁴ and each product's K.
//
// The bound, for one (b, h), rows t and keys s ≤ t (A, P, out, ... exact, in double; a hat is
// what the bf16 path computes). A product of K terms on inputs rounded to bf16 with a float sum
// is off by at most (2u + u² + K·ε)·Σ|a·b| (tests/test_bf16.cpp):
//   scores   |Ŝ − S| ≤ e_ts = (2u + u² + (hs + 3)ε)·Σ_i |q_ti·k_si| / √hs   (+3: α = 1/√hs, its
//            float value, one spare); E_t = max_s e_ts.
//   softmax  every score of row t moves by at most E_t, so each probability moves by a factor in
//            [e^(−2E_t), e^(2E_t)]; with the float softmax's own (T + 16)ε:
//            |Â − A| ≤ α_t·A,  α_t = (1 + (T + 16)ε)·e^(2E_t) − 1.   att is Â, checked with it.
//   P        dropout (a float multiply, ε) and the rounding to bf16 (u):  |P̂ − P| ≤ π_t·P,
//            π_t = (1 + α_t)(1 + ε)(1 + u) − 1.
//   out      P̂·v̂ over t1 ≤ T keys:  |ôut − out| ≤ ((1 + π_t)(1 + u)(1 + (T + 1)ε) − 1)·Σ_s P_ts|v_s|.
//   dv       Σ_t P̂·dout̂, summed over the row blocks (beta 1 adds): the same with (2T)ε.
//   dP       dout̂·v̂ᵀ, K = hs, kept float:  |dP̂ − dP| ≤ η = (2u + u² + (hs + 1)ε)·Σ_i |dout_i·v_si|.
//   dA       dP·f in float:  |dÂ − dA| ≤ ζ = f·((1 + 2ε)η + 2ε|dP|).
//   dS       Â ⊙ (dÂ − μ̂), μ = Σ_j A_j·dA_j, in float. With |Â_j| ≤ (1 + α)A_j, |dÂ_j| ≤ |dA_j| + ζ_j:
//            |μ̂ − μ| ≤ M_t = Σ_j [α A_j(|dA_j| + ζ_j) + A_j ζ_j] + (T + 2)ε Σ_j (1 + α)A_j(|dA_j| + ζ_j),
//            |dŜ − dS| ≤ σ = α A (|dA| + ζ + |μ| + M) + A (ζ + M) + 3ε (1 + α) A (|dA| + ζ + |μ| + M);
//            rounded to bf16:  |dS̃ − dS| ≤ τ = σ(1 + u) + u|dS|.
//   dq, dk   dS̃·k̂/√hs and dS̃ᵀ·q̂/√hs:  Σ_s [τ(1 + u) + u|dS| + (2T + 3)ε(|dS| + τ)(1 + u)]·|k_s| / √hs.
// Every step is an upper bound (no first-order terms dropped), so the check is worst ≤ 1. The
// inputs' u applies to q, k, v and dout; with inputs that are bf16 numbers already, their u is 0
// and only P's and dS's rounding remains (the widen-vs-oneDNN check uses that).
#include "tests/catch.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "lib/kernels/bf16.h"
#include "lib/kernels/matmul_bf16.h"
#include "lib/layers/attention.h"
#include "tests/attention_head.h"
#include "tests/gradcheck.h"

using namespace hg;
using namespace hg::test;
using hg::test::randn;

namespace {

const double kU = std::ldexp(1.0, -8), kEps = std::ldexp(1.0, -24);

struct Shape {
    int B, T, C, NH;
};

// What one bf16 (or float) run wrote.
struct Result {
    std::vector<float> out, att, dqkv;
};

// Forward then backward on fresh buffers filled with `fill` (so a result that read them shows).
Result run_bf16(const Shape& sh, const std::vector<float>& qkv, const std::vector<float>& dout, Dropout fwd,
                Dropout bwd, float fill = 7.0f) {
    const int B = sh.B, T = sh.T, C = sh.C, NH = sh.NH;
    Result r{std::vector<float>(dout.size(), fill), std::vector<float>(size_t(B) * NH * T * T, fill),
             std::vector<float>(qkv.size(), fill)};
    std::vector<float> scratch(r.att.size(), fill);
    std::vector<bf16> scratch16(attention_bf16_scratch(B, T, C, NH), 0x7FC0);  // NaNs
    std::vector<bf16> out16(r.out.size(), 0x7FC0), dqkv16(r.dqkv.size(), 0x7FC0);
    attention_forward_bf16(r.out.data(), out16.data(), r.att.data(), scratch.data(), scratch16.data(), qkv.data(), B,
                           T, C, NH, fwd);
    attention_backward_bf16(r.dqkv.data(), dqkv16.data(), scratch.data(), scratch16.data(), dout.data(), qkv.data(),
                            r.att.data(), B, T, C, NH, bwd);
    // the rounded copies for the next products: out and dqkv, each rounded, every entry
    for (size_t i = 0; i < out16.size(); i++) REQUIRE(out16[i] == bf16_from_float(r.out[i]));
    for (size_t i = 0; i < dqkv16.size(); i++) REQUIRE(dqkv16[i] == bf16_from_float(r.dqkv[i]));
    return r;
}

Result run_float(const Shape& sh, const std::vector<float>& qkv, const std::vector<float>& dout, Dropout drop) {
    const int B = sh.B, T = sh.T, C = sh.C, NH = sh.NH;
    Result r{std::vector<float>(dout.size()), std::vector<float>(size_t(B) * NH * T * T),
             std::vector<float>(qkv.size())};
    std::vector<float> scratch(r.att.size());
    attention_forward_sgemm(r.out.data(), r.att.data(), scratch.data(), qkv.data(), B, T, C, NH, drop);
    attention_backward_sgemm(r.dqkv.data(), scratch.data(), dout.data(), qkv.data(), r.att.data(), B, T, C, NH, drop);
    return r;
}

// The worst |got − exact| / bound over out, att and dqkv (each its own), from the derivation above.
struct Worst {
    double out = 0, att = 0, dqkv = 0;
    bool att_masked_zero = true;  // att above the diagonal exactly 0
};

Worst check_bound(const Shape& sh, const std::vector<float>& qkv, const std::vector<float>& dout, Dropout drop,
                  const Result& r, double u_in) {
    const int B = sh.B, T = sh.T, C = sh.C, NH = sh.NH, hs = C / NH;
    const size_t C3 = 3 * size_t(C);
    const double u = kU, eps = kEps, scale = 1.0 / std::sqrt(double(hs)), gs = (T + 16) * eps;
    std::vector<double> dqkv(qkv.size(), 0.0), bound_dqkv(qkv.size(), 0.0);
    Worst w;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const size_t bh = size_t(b) * NH + h;
            const AttentionHead x{qkv, dout, b, h, T, C, NH};
            std::vector<double> A(size_t(T) * T, 0.0), dS(A.size(), 0.0), tau(A.size(), 0.0), P(A.size(), 0.0),
                alpha(T), pi(T);
            for (int t = 0; t < T; t++) {
                double E = 0, mx = -1e300;
                std::vector<double> S(t + 1);
                for (int s = 0; s <= t; s++) {
                    double dot = 0, mag = 0;
                    for (int i = 0; i < hs; i++) dot += x.q(t, i) * x.k(s, i), mag += std::fabs(x.q(t, i) * x.k(s, i));
                    S[s] = dot * scale, mx = std::max(mx, S[s]);
                    E = std::max(E, (2 * u_in + u_in * u_in + (hs + 3) * eps) * mag * scale);
                }
                double sum = 0;
                for (int s = 0; s <= t; s++) sum += std::exp(S[s] - mx);
                alpha[t] = (1 + gs) * std::exp(2 * E) - 1;
                pi[t] = (1 + alpha[t]) * (1 + eps) * (1 + u) - 1;
                const size_t row = (bh * T + t) * T;
                for (int s = 0; s <= t; s++) {
                    A[size_t(t) * T + s] = std::exp(S[s] - mx) / sum;
                    P[size_t(t) * T + s] = A[size_t(t) * T + s] * attention_dropout_factor<double>(drop, row + s);
                    w.att = std::max(
                        w.att, bound_ratio(r.att[row + s], A[size_t(t) * T + s], alpha[t] * A[size_t(t) * T + s]));
                }
                for (int s = t + 1; s < T; s++) w.att_masked_zero = w.att_masked_zero && r.att[row + s] == 0.0f;
                for (int i = 0; i < hs; i++) {  // out
                    double exact = 0, mag = 0;
                    for (int s = 0; s <= t; s++)
                        exact += P[size_t(t) * T + s] * x.v(s, i), mag += P[size_t(t) * T + s] * std::fabs(x.v(s, i));
                    const double bound = ((1 + pi[t]) * (1 + u_in) * (1 + (T + 1) * eps) - 1) * mag;
                    w.out =
                        std::max(w.out, bound_ratio(r.out[(size_t(b) * T + t) * C + size_t(h) * hs + i], exact, bound));
                }
                // the backward of row t: dP, dA, dS and their bounds
                std::vector<double> dA(t + 1), zeta(t + 1), dP(t + 1);
                double mu = 0;
                for (int s = 0; s <= t; s++) {
                    double dot = 0, mag = 0;
                    for (int i = 0; i < hs; i++)
                        dot += x.dy(t, i) * x.v(s, i), mag += std::fabs(x.dy(t, i) * x.v(s, i));
                    const double f = attention_dropout_factor<double>(drop, row + s);
                    const double eta = (2 * u_in + u_in * u_in + (hs + 1) * eps) * mag;
                    dP[s] = dot, dA[s] = f * dot, zeta[s] = f * ((1 + 2 * eps) * eta + 2 * eps * std::fabs(dot));
                    mu += A[size_t(t) * T + s] * dA[s];
                }
                double M = 0;
                for (int j = 0; j <= t; j++) {
                    const double Aj = A[size_t(t) * T + j], a = alpha[t];
                    M += a * Aj * (std::fabs(dA[j]) + zeta[j]) + Aj * zeta[j] +
                         (T + 2) * eps * (1 + a) * Aj * (std::fabs(dA[j]) + zeta[j]);
                }
                for (int s = 0; s <= t; s++) {
                    const double As = A[size_t(t) * T + s], a = alpha[t];
                    const double big = std::fabs(dA[s]) + zeta[s] + std::fabs(mu) + M;
                    const double sigma = a * As * big + As * (zeta[s] + M) + 3 * eps * (1 + a) * As * big;
                    dS[size_t(t) * T + s] = As * (dA[s] - mu);
                    tau[size_t(t) * T + s] = sigma * (1 + u) + u * std::fabs(dS[size_t(t) * T + s]);
                }
            }
            // dq, dk, dv and their bounds, into the (B, T, 3C) layout
            for (int t = 0; t < T; t++)
                for (int s = 0; s <= t; s++) {
                    const double ds = dS[size_t(t) * T + s], ta = tau[size_t(t) * T + s], p = P[size_t(t) * T + s];
                    const double c =
                        ta * (1 + u_in) + u_in * std::fabs(ds) + (2 * T + 3) * eps * (std::fabs(ds) + ta) * (1 + u_in);
                    const double cv = (1 + pi[t]) * (1 + u_in) * (1 + 2 * T * eps) - 1;
                    for (int i = 0; i < hs; i++) {
                        const size_t qt = (size_t(b) * T + t) * C3 + size_t(h) * hs + i;
                        const size_t ks = (size_t(b) * T + s) * C3 + C + size_t(h) * hs + i;
                        const size_t vs = ks + C;
                        dqkv[qt] += ds * x.k(s, i) * scale, bound_dqkv[qt] += c * std::fabs(x.k(s, i)) * scale;
                        dqkv[ks] += ds * x.q(t, i) * scale, bound_dqkv[ks] += c * std::fabs(x.q(t, i)) * scale;
                        dqkv[vs] += p * x.dy(t, i), bound_dqkv[vs] += cv * p * std::fabs(x.dy(t, i));
                    }
                }
        }
    for (size_t i = 0; i < dqkv.size(); i++) w.dqkv = std::max(w.dqkv, bound_ratio(r.dqkv[i], dqkv[i], bound_dqkv[i]));
    // The test's own exact values are the double twin's.
    std::vector<double> qkv_d(qkv.begin(), qkv.end()), dout_d(dout.begin(), dout.end()), out_d(dout.size()),
        att_d(size_t(B) * NH * T * T), scratch_d(att_d.size()), dqkv_d(qkv.size());
    attention_forward_twin(out_d.data(), att_d.data(), scratch_d.data(), qkv_d.data(), B, T, C, NH, drop);
    attention_backward_twin(dqkv_d.data(), scratch_d.data(), dout_d.data(), qkv_d.data(), att_d.data(), B, T, C, NH,
                            drop);
    double twin_diff = 0;
    for (size_t i = 0; i < dqkv.size(); i++) twin_diff = std::max(twin_diff, std::fabs(dqkv[i] - dqkv_d[i]));
    CHECK(twin_diff < 1e-9);
    return w;
}

const Shape kShapes[] = {
    {2, 130, 128, 2},  // hs 64, three row blocks, the last of 2 rows
    {1, 70, 48, 4},    // hs 12, two blocks
    {2, 64, 128, 4},   // the course model's heads (the float path runs them fused)
    {1, 300, 64, 2},   // rows longer than the 256 probabilities rounded at a time
};

}  // namespace

TEST_CASE("attention in bf16: out, att and dqkv within the bound from u, ε and K, dropout off and on",
          "[bf16][attention]") {
    for (bool widen : {false, true}) {
        matmul_bf16_force_widen(widen);
        for (const Shape& sh : kShapes)
            for (float p : {0.0f, 0.25f}) {
                const Dropout drop{p, 0x5eed};
                const auto qkv = randn<float>(size_t(sh.B) * sh.T * 3 * sh.C, 40 + sh.T, 1.5);
                const auto dout = randn<float>(size_t(sh.B) * sh.T * sh.C, 41 + sh.T);
                const Result r = run_bf16(sh, qkv, dout, drop, drop);
                const Worst w = check_bound(sh, qkv, dout, drop, r, kU);
                INFO(matmul_bf16_describe() << ", B " << sh.B << " T " << sh.T << " C " << sh.C << " NH " << sh.NH
                                            << " p " << p << ": worst out "
                                            << w.out << ", att " << w.att << ", dqkv " << w.dqkv << " of the bound");
                CHECK(w.out <= 1.0);
                CHECK(w.att <= 1.0);
                CHECK(w.dqkv <= 1.0);
                CHECK(w.att_masked_zero);
                CHECK(w.out > 0.02);  // the inputs really were rounded: a float path sits far below (next test)
                CHECK(w.dqkv > 0.02);
                if (!widen && p > 0 && sh.T == 130)
                    WARN("bf16 attention, worst of the bound: out " << w.out << ", att " << w.att << ", dqkv "
                                                                    << w.dqkv);
            }
    }
    matmul_bf16_force_widen(false);
}

// The bound check can fail. Each planted bug is what a slip in attention_forward_bf16/backward
// would compute; each must land outside the bound (or, for the float path, below the floor).
TEST_CASE("attention in bf16: the bound check rejects planted bugs", "[bf16][attention]") {
    const Shape sh{2, 130, 128, 2};
    const Dropout drop{0.25f, 0x5eed}, other{0.25f, 0x5eee};
    const auto qkv = randn<float>(size_t(sh.B) * sh.T * 3 * sh.C, 170, 1.5);
    const auto dout = randn<float>(size_t(sh.B) * sh.T * sh.C, 171);
    // nothing rounded (the float sgemm path): inside the bound, but far under the floor the bf16
    // path reaches, which is how the test above knows that q, k, v, P, dout and dS were rounded
    const Worst none = check_bound(sh, qkv, dout, drop, run_float(sh, qkv, dout, drop), kU);
    CHECK(none.out < 0.02);
    CHECK(none.dqkv < 0.02);
    // the scale 1/√hs applied twice (q arriving pre-scaled): the scores, so everything, move
    std::vector<float> q_scaled = qkv;
    const int C3 = 3 * sh.C, hs = sh.C / sh.NH;
    for (size_t n = 0; n < size_t(sh.B) * sh.T; n++)
        for (int i = 0; i < sh.C; i++) q_scaled[n * C3 + i] /= std::sqrt(float(hs));
    const Worst twice = check_bound(sh, qkv, dout, drop, run_bf16(sh, q_scaled, dout, drop, drop), kU);
    CHECK(twice.out > 1.0);
    CHECK(twice.att > 1.0);
    // the backward with another dropout mask than the forward's
    const Worst mask = check_bound(sh, qkv, dout, drop, run_bf16(sh, qkv, dout, drop, other), kU);
    CHECK(mask.out <= 1.0);
    CHECK(mask.dqkv > 1.0);
    // dout's copy read with the wrong sign (the backward of -dout)
    std::vector<float> flipped = dout;
    for (float& x : flipped) x = -x;
    const Worst sign = check_bound(sh, qkv, dout, drop, run_bf16(sh, qkv, flipped, drop, drop), kU);
    CHECK(sign.dqkv > 1.0);
}

TEST_CASE("attention in bf16: out and dqkv are written, not added to; same inputs give the same bits",
          "[bf16][attention]") {
    for (const Shape& sh : {Shape{2, 130, 128, 2}, Shape{2, 64, 128, 4}})
        for (float p : {0.0f, 0.25f}) {
            const Dropout drop{p, 0x5eed};
            INFO("T " << sh.T << " p " << p);
            const auto qkv = randn<float>(size_t(sh.B) * sh.T * 3 * sh.C, 70, 1.5);
            const auto dout = randn<float>(size_t(sh.B) * sh.T * sh.C, 71);
            const Result a = run_bf16(sh, qkv, dout, drop, drop, 7.0f);
            const Result b = run_bf16(sh, qkv, dout, drop, drop, -3.0f);
            const Result n = run_bf16(sh, qkv, dout, drop, drop, std::numeric_limits<float>::quiet_NaN());
            {  // no working space: hg::Error
                std::vector<float> f(size_t(sh.B) * sh.NH * sh.T * sh.T + qkv.size());
                CHECK_THROWS_AS(attention_forward_bf16(f.data(), nullptr, f.data(), f.data(), nullptr, qkv.data(), sh.B,
                                                       sh.T, sh.C, sh.NH, drop),
                                Error);
                CHECK_THROWS_AS(attention_backward_bf16(f.data(), nullptr, f.data(), nullptr, dout.data(), qkv.data(),
                                                        f.data(), sh.B, sh.T, sh.C, sh.NH, drop),
                                Error);
            }
            for (const Result* o : {&b, &n}) {  // whatever the buffers held: the same bits
                CHECK(std::memcmp(a.out.data(), o->out.data(), a.out.size() * sizeof(float)) == 0);
                CHECK(std::memcmp(a.att.data(), o->att.data(), a.att.size() * sizeof(float)) == 0);
                CHECK(std::memcmp(a.dqkv.data(), o->dqkv.data(), a.dqkv.size() * sizeof(float)) == 0);
            }
        }
}

// The widening path (no AVX512_BF16, or forced) runs the float products on the same rounded
// inputs: the same numbers up to the order of the float sums. With inputs that are bf16 numbers
// already (their rounding exact, u_in = 0), both backends' att must sit within the float-only
// bound of the exact att, and out and dqkv within the bound of P's and dS's rounding alone.
TEST_CASE("attention in bf16: oneDNN and the widening path agree to float sum order", "[bf16][attention]") {
    const Shape sh{2, 130, 128, 2};
    auto qkv = randn<float>(size_t(sh.B) * sh.T * 3 * sh.C, 90, 1.5);
    auto dout = randn<float>(size_t(sh.B) * sh.T * sh.C, 91);
    for (float& x : qkv) x = bf16_to_float(bf16_from_float(x));
    for (float& x : dout) x = bf16_to_float(bf16_from_float(x));
    const Dropout drop{0.25f, 0x5eed};
    std::vector<Result> runs;
    for (bool widen : {false, true}) {
        matmul_bf16_force_widen(widen);
        runs.push_back(run_bf16(sh, qkv, dout, drop, drop));
        const Worst w = check_bound(sh, qkv, dout, drop, runs.back(), 0.0);
        INFO(matmul_bf16_describe() << ": worst out " << w.out << ", att " << w.att << ", dqkv " << w.dqkv);
        CHECK(w.att <= 1.0);
        CHECK(w.out <= 1.0);
        CHECK(w.dqkv <= 1.0);
    }
    matmul_bf16_force_widen(false);
    double att_diff = 0;
    for (size_t i = 0; i < runs[0].att.size(); i++)
        att_diff = std::max(att_diff, double(std::fabs(runs[0].att[i] - runs[1].att[i])));
    INFO("largest difference of att between the backends " << att_diff);
    CHECK(att_diff < 1e-5);
}

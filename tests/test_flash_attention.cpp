// test_flash_attention.cpp — the flash layer (lib/layers/flash_attention.h): attention without the
// T×T matrix, proven like every other layer.
//
//   [gradcheck]  the scalar twin's dqkv against central differences in double (tests/gradcheck.h:
//                rtol 1e-6, atol 1e-9), T = 1, odd T, T not a multiple of the tile, tiles of 1 to
//                more than T, with and without dropout; the twin equals the materialised twin
//                (attention.h) in double, for every tile, so the dropout mask does not depend on it;
//                planted bugs (a wrong rescale factor, the diagonal tile skipped, D from the wrong
//                operand) fail the checks.
//   [layers]     the fast float layer against the materialized attention (attention_forward/backward) on
//                every preset's shapes, odd T, T = 1, with and without dropout, after rope and
//                QK-norm; lse against log Σ exp in double; the layer's contract (out, lse, dqkv
//                written, whatever the buffers held); bad arguments.
//   [simd]       the Highway kernels against the scalar twin on every SIMD target, float and bf16;
//                the row pass's exp against exp in double.
//   [bf16]       the bf16 layer within an entry-wise bound derived below, and the float layer far
//                under it; the CPU's dot products and the widened ones agree.
//   determinism  the same bits with 1, 2 and 3 threads, and with scratch for fewer threads.
//
// ---- Float against the materialized attention: the tolerance ----------------------------------------------
// flash_attention.h lists where the two differ in rounding (a–d): tens of ε = 2⁻²⁴ relative to the
// magnitudes involved. Each layer is within ~1e-6 of the exact values (both measured against the
// double twin, below); the two compared with each other: out within 1e-5 of max|out|, dqkv within
// 2e-5 of max|dqkv| (the measured worst is in each INFO, about a tenth of that).
//
// ---- bf16: the bound -----------------------------------------------------------------------------
// For one (b, h), row t, keys s ≤ t; A, P, out, ... exact (double); a hat is what the bf16 layer
// computes; u = 2⁻⁸ (bf16), ε = 2⁻²⁴ (float); u_in is u for the inputs q, k, v, dout (0 where they are
// bf16 numbers already). A product of K terms on rounded inputs with a float sum is off by at most
// (2u_in + u_in² + K·ε)·Σ|a·b| (tests/test_bf16.cpp). tests/test_attention_bf16.cpp derives the
// materialised layer's bound; the flash layer's differs where it computes differently:
//   scores   |Ŝ − S| ≤ e_ts = (2u_in + u_in² + (hs + 3)ε)·Σ_i |q_ti·k_si| / √hs;  E_t = max_s e_ts.
//   softmax  the online form: every weight exp(Ŝ − m) has its exponent's rounding (ε per unit of
//            |Ŝ − m| ≤ 2·R_t, R_t = max_s |S| + E_t), Exp's own (≤ 4ε), and up to n_t rescale factors
//            c (each the same two again), n_t = the tiles row t reads; ℓ sums ≤ T weights, out is
//            divided by ℓ. So the normalised weights are within a factor (1 ± α_t) of A:
//              γ_t = (T + 16 + 4n_t + 4(n_t + 1)·R_t)·ε,   α_t = (1 + γ_t)·e^(2E_t) − 1.
//   out      P̃ = weight·f (ε), rounded (u): π_t = (1 + α_t)(1 + ε)(1 + u) − 1;
//            |ôut − out| ≤ ((1 + π_t)(1 + u_in)(1 + (T + 3)ε) − 1)·Σ_s P_ts·|v_s|.
//   lse      lse is 1-Lipschitz in the scores (max norm), ℓ's relative error is ≤ γ_t, and m + log ℓ
//            rounds twice: |lŝe − lse| ≤ λ_t = E_t + 2γ_t + 2ε(|lse_t| + 1).
//   A again  the backward's exp(Ŝ − lŝe): the same Ŝ (the same kernel, the same order), so its
//            exponent is off by e_ts + λ_t + ε(|S| + |lse| + e_ts + λ_t), and Exp by 4ε:
//            |Â − A| ≤ β_ts·A,  β_ts = e^(e_ts + λ_t + ε(|S_ts| + |lse_t| + e_ts + λ_t))·(1 + 4ε) − 1.
//   dv       P̃ = Â·f rounded: π'_ts = (1 + β_ts)(1 + ε)(1 + u) − 1, summed over ≤ T rows in float:
//            |d̂v_s − dv_s| ≤ Σ_t ((1 + π'_ts)(1 + u_in)(1 + 2Tε) − 1)·P_ts·|dout_t|.
//   dP, dA   as in the materialised bound: η = (2u_in + u_in² + (hs + 1)ε)·Σ_i |dout_ti·v_si|,
//            ζ = f·((1 + 2ε)η + 2ε|dP|).
//   D        dout·ô in float, ô the forward's out as the backward reads it: ôut, or in the bf16
//            layer ôut rounded, off by b_ti = bound(out_ti), or (1 + u)·bound(out_ti) + u·|out_ti|:
//            |D̂ − D| ≤ δD_t = Σ_i |dout_ti|·b_ti + (hs + 1)ε·Σ_i |dout_ti|·(|out_ti| + b_ti).
//   dS       the layer forms dS/√hs = (Â·σ)·(dÂ − D̂) with σ = fl(1/√hs): with κ = ζ + δD + ε(|dA| + ζ
//            + |D| + δD) the error of dÂ − D̂,
//            |dŜ − dS/√hs| ≤ σ' = [β·A·(|dA − D| + κ) + A·κ]/√hs + 4ε(1 + β)·A·(|dA − D| + κ)/√hs,
//            rounded: τ = σ'(1 + u) + u·|dS|/√hs.
//   dq, dk   dS̃·k̃ and dS̃ᵀ·q̃ over ≤ T terms: Σ_s [τ(1 + u_in) + u_in|dS|/√hs + (2T + 3)ε(|dS|/√hs
//            + τ)(1 + u_in)]·|k_s| (and with q_t for dk).
// Every step is an upper bound, so the check is worst ≤ 1. The float layer is checked with the same
// bound, where it must sit far below (its products round nothing), which is how the bf16 test knows
// its inputs really were rounded.
#include "tests/catch.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "lib/kernels/bf16.h"
#include "lib/kernels/flash_attention_kernels.h"
#include "lib/layers/attention.h"
#include "lib/layers/flash_attention.h"
#include "lib/layers/qknorm.h"
#include "lib/layers/rope.h"
#include "tests/attention_head.h"
#include "tests/gradcheck.h"
#include "tests/layer_checks.h"

using namespace hg;
using namespace hg::test;
using Floats = std::vector<float>;
using Doubles = std::vector<double>;

namespace {

const double kU = std::ldexp(1.0, -8), kEps = std::ldexp(1.0, -24);
const float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Shape {
    int B, T, C, NH;
    int hs() const { return C / NH; }
    size_t qkv() const { return size_t(B) * T * 3 * C; }
    size_t out() const { return size_t(B) * T * C; }
    size_t lse() const { return size_t(B) * NH * T; }
    size_t att() const { return size_t(B) * NH * T * T; }
};

std::string describe(const Shape& sh, float p) {
    return "B " + std::to_string(sh.B) + " T " + std::to_string(sh.T) + " C " + std::to_string(sh.C) + " NH " +
           std::to_string(sh.NH) + " p " + std::to_string(p);
}

// What one run of the flash layer wrote (out16: in bf16 only).
struct Flash {
    Floats out, lse, dqkv;
    std::vector<bf16> out16;
};

// Forward then backward of the flash layer (float, or bf16 products) on buffers filled with `fill`,
// scratch too (so a result that read them shows); the bf16 copies checked to be out and dqkv rounded,
// the forward run again with the rounded out alone, and the backward with the rounded dqkv alone.
Flash run_flash(const Shape& sh, const Floats& qkv, const Floats& dout, Dropout fwd, Dropout bwd, bool in_bf16,
                float fill = kNaN, FlashProducts products = FlashProducts::Bf16Widened) {
    Flash r{Floats(sh.out(), fill), Floats(sh.lse(), fill), Floats(sh.qkv(), fill), {}};
#ifdef _OPENMP
    const int threads = omp_get_max_threads();
#else
    const int threads = 1;
#endif
    const size_t per = in_bf16 ? flash_attention_bf16_scratch(sh.T, sh.C, sh.NH)
                               : flash_attention_scratch(sh.T, sh.C, sh.NH);
    Floats scratch(per * threads, fill);
    if (in_bf16) {
        std::vector<bf16> dqkv16(r.dqkv.size(), 0x7FC0);  // NaNs
        r.out16.assign(r.out.size(), 0x7FC0);
        flash_attention_forward_bf16(r.out.data(), r.out16.data(), r.lse.data(), scratch.data(), scratch.size(),
                                     qkv.data(), sh.B, sh.T, sh.C, sh.NH, fwd, products);
        flash_attention_backward_bf16(r.dqkv.data(), dqkv16.data(), scratch.data(), scratch.size(), dout.data(),
                                      qkv.data(), r.out16.data(), r.lse.data(), sh.B, sh.T, sh.C, sh.NH, bwd, products);
        size_t wrong = 0;
        for (size_t i = 0; i < r.out16.size(); i++) wrong += r.out16[i] != bf16_from_float(r.out[i]);
        for (size_t i = 0; i < dqkv16.size(); i++) wrong += dqkv16[i] != bf16_from_float(r.dqkv[i]);
        CHECK(wrong == 0);
        // without the float out, the rounded one alone, the same bits (and the same lse)
        std::vector<bf16> out_alone(r.out16.size(), 0x7FC0);
        Floats lse_alone(r.lse.size(), fill);
        flash_attention_forward_bf16(nullptr, out_alone.data(), lse_alone.data(), scratch.data(), scratch.size(),
                                     qkv.data(), sh.B, sh.T, sh.C, sh.NH, fwd, products);
        CHECK(out_alone == r.out16);
        CHECK(mismatches(lse_alone, r.lse) == 0);
        // without the float dqkv, the rounded one alone, the same bits
        std::vector<bf16> alone(dqkv16.size(), 0x7FC0);
        flash_attention_backward_bf16(nullptr, alone.data(), scratch.data(), scratch.size(), dout.data(), qkv.data(),
                                      r.out16.data(), r.lse.data(), sh.B, sh.T, sh.C, sh.NH, bwd, products);
        CHECK(alone == dqkv16);
    } else {
        flash_attention_forward(r.out.data(), r.lse.data(), scratch.data(), scratch.size(), qkv.data(), sh.B, sh.T,
                                sh.C, sh.NH, fwd);
        flash_attention_backward(r.dqkv.data(), scratch.data(), scratch.size(), dout.data(), qkv.data(), r.out.data(),
                                 r.lse.data(), sh.B, sh.T, sh.C, sh.NH, bwd);
    }
    return r;
}

// The materialized attention (attention.h), float: out and dqkv.
struct Materialized {
    Floats out, dqkv;
};
Materialized run_materialized(const Shape& sh, const Floats& qkv, const Floats& dout, Dropout drop) {
    Materialized r{Floats(sh.out()), Floats(sh.qkv())};
    Floats att(sh.att()), scratch(sh.att());
    attention_forward(r.out.data(), att.data(), scratch.data(), qkv.data(), sh.B, sh.T, sh.C, sh.NH, drop);
    attention_backward(r.dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), sh.B, sh.T, sh.C, sh.NH,
                       drop);
    return r;
}

// lse (B, NH, T) in double from qkv: log Σ_{s ≤ t} exp(q_t·k_s/√hs), for rows t ≡ 0 (mod every).
double lse_error(const Shape& sh, const Floats& qkv, const Floats& lse, int every = 1) {
    const int hs = sh.hs();
    const size_t C3 = 3 * size_t(sh.C);
    double worst = 0;
    for (int b = 0; b < sh.B; b++)
        for (int h = 0; h < sh.NH; h++)
            for (int t = 0; t < sh.T; t += every) {
                const float* q = qkv.data() + (size_t(b) * sh.T + t) * C3 + size_t(h) * hs;
                Doubles S(t + 1);
                double mx = -1e300;
                for (int s = 0; s <= t; s++) {
                    const float* k = qkv.data() + (size_t(b) * sh.T + s) * C3 + sh.C + size_t(h) * hs;
                    double dot = 0;
                    for (int i = 0; i < hs; i++) dot += double(q[i]) * k[i];
                    S[s] = dot / std::sqrt(double(hs)), mx = std::max(mx, S[s]);
                }
                double sum = 0;
                for (double x : S) sum += std::exp(x - mx);
                const double want = mx + std::log(sum);
                const double got = lse[(size_t(b) * sh.NH + h) * sh.T + t];
                worst = std::max(worst, std::fabs(got - want) / (1 + std::fabs(want)));
            }
    return worst;
}

// The presets' shapes (course, baby GPT, GPT-2 small at a small B), odd T, T = 1, T not a
// multiple of the tile, a head that is no whole number of vectors.
const Shape kPresetShapes[] = {{4, 64, 128, 4}, {2, 256, 384, 6}, {1, 1024, 768, 12}};
const Shape kOddShapes[] = {{3, 1, 32, 2}, {2, 37, 48, 2}, {2, 130, 64, 2}, {1, 67, 36, 3}, {2, 65, 40, 2}};

}  // namespace

// ---- the twin: finite differences, the materialised reference, planted bugs ---------------------------

namespace {

struct TwinCase {
    int B, T, C, NH, tile;
    float p;
    double scale;
    uint64_t seed;
};
const TwinCase kTwinCases[] = {
    {1, 1, 6, 2, 1, 0.0f, 1.0, 11},   {2, 1, 6, 3, 4, 0.25f, 1.0, 12},  // T = 1
    {2, 3, 6, 2, 1, 0.0f, 1.0, 13},   {2, 5, 6, 3, 2, 0.25f, 1.0, 14},  // tiles of 1 and 2
    {1, 7, 8, 2, 3, 0.0f, 2.5, 15},   {2, 9, 6, 2, 4, 0.25f, 1.0, 16},  // T not a multiple of the tile
    {1, 6, 5, 1, 6, 0.0f, 0.3, 17},   {1, 6, 6, 2, 64, 0.25f, 1.0, 18},  // one tile; a tile longer than T
    {1, 10, 12, 2, 4, 0.0f, 1.0, 19}, {2, 11, 8, 4, 3, 0.25f, 2.5, 20},
};

// What the checks found for one case and one (possibly planted) twin.
struct TwinChecks {
    GradCheckResult grad;
    double out = 0, lse = 0, dqkv = 0;  // worst |twin − materialised| / (1e-12 + 1e-10·|materialised|)
    bool ok() const { return grad.ok && out <= 1 && lse <= 1 && dqkv <= 1; }
};

template <FlashPlant kPlant>
TwinChecks twin_checks(const TwinCase& tc) {
    const Shape sh{tc.B, tc.T, tc.C, tc.NH};
    const Dropout drop{tc.p, 0x5eed};
    auto qkv = randn(sh.qkv(), tc.seed, tc.scale);
    const auto r = randn(sh.out(), tc.seed + 1000);
    Doubles out(sh.out()), lse(sh.lse());
    auto loss = [&] {
        flash_attention_forward_twin<double, kPlant>(out.data(), lse.data(), qkv.data(), sh.B, sh.T, sh.C, sh.NH, drop,
                                                     tc.tile);
        return dot(r, out.data());
    };
    loss();  // out and lse at the unperturbed point, for the backward
    Doubles dqkv(sh.qkv());
    flash_attention_backward_twin<double, kPlant>(dqkv.data(), r.data(), qkv.data(), out.data(), lse.data(), sh.B,
                                                  sh.T, sh.C, sh.NH, drop, tc.tile);
    TwinChecks c;
    // the materialised layer in double: out, lse = log Σ exp(S) from its probabilities, dqkv
    Doubles ref_out(sh.out()), att(sh.att()), scratch(sh.att()), ref_dqkv(sh.qkv()), ref_lse(sh.lse());
    attention_forward_twin(ref_out.data(), att.data(), scratch.data(), qkv.data(), sh.B, sh.T, sh.C, sh.NH, drop);
    attention_backward_twin(ref_dqkv.data(), scratch.data(), r.data(), qkv.data(), att.data(), sh.B, sh.T, sh.C, sh.NH,
                            drop);
    const int hs = sh.hs();
    for (int b = 0; b < sh.B; b++)  // lse_t = S[t,t] − log A[t,t]: the diagonal's score and probability
        for (int h = 0; h < sh.NH; h++)
            for (int t = 0; t < sh.T; t++) {
                const double* q = qkv.data() + (size_t(b) * sh.T + t) * 3 * sh.C + size_t(h) * hs;
                double S = 0;
                for (int i = 0; i < hs; i++) S += q[i] * q[sh.C + i];
                const size_t bh = size_t(b) * sh.NH + h;
                ref_lse[bh * sh.T + t] = S / std::sqrt(double(hs)) - std::log(att[(bh * sh.T + t) * sh.T + t]);
            }
    c.out = worst_ratio(out.data(), ref_out.data(), out.size(), 1e-12, 1e-10);
    c.lse = worst_ratio(lse.data(), ref_lse.data(), lse.size(), 1e-12, 1e-10);
    c.dqkv = worst_ratio(dqkv.data(), ref_dqkv.data(), dqkv.size(), 1e-12, 1e-10);
    c.grad = gradcheck(qkv.data(), qkv.size(), dqkv.data(), loss);  // last: it moves qkv and back
    return c;
}

std::string describe(const TwinCase& tc) {
    return describe(Shape{tc.B, tc.T, tc.C, tc.NH}, tc.p) + " tile " + std::to_string(tc.tile) + " scale " +
           std::to_string(tc.scale);
}

}  // namespace

TEST_CASE("flash twin: dqkv matches finite differences, and the twin is the materialised attention",
          "[flash][gradcheck]") {
    for (const TwinCase& tc : kTwinCases) {
        const TwinChecks c = twin_checks<FlashPlant::None>(tc);
        INFO(describe(tc) << ": " << c.grad.str() << "; against the materialised twin: out " << c.out << ", lse "
                          << c.lse << ", dqkv " << c.dqkv << " of the tolerance");
        CHECK(c.grad.ok);
        CHECK(c.out <= 1.0);
        CHECK(c.lse <= 1.0);
        CHECK(c.dqkv <= 1.0);
    }
}

TEST_CASE("flash twin: the same results for every tile size (so the same dropout mask)", "[flash][gradcheck]") {
    const Shape sh{2, 13, 12, 3};
    const Dropout drop{0.3f, 77};
    const auto qkv = randn(sh.qkv(), 5), dout = randn(sh.out(), 6);
    Doubles out1(sh.out()), lse1(sh.lse()), dqkv1(sh.qkv());
    flash_attention_forward_twin(out1.data(), lse1.data(), qkv.data(), sh.B, sh.T, sh.C, sh.NH, drop, 1);
    flash_attention_backward_twin(dqkv1.data(), dout.data(), qkv.data(), out1.data(), lse1.data(), sh.B, sh.T, sh.C,
                                  sh.NH, drop, 1);
    for (int tile : {2, 3, 5, 13, 64}) {
        Doubles out(sh.out()), lse(sh.lse()), dqkv(sh.qkv());
        flash_attention_forward_twin(out.data(), lse.data(), qkv.data(), sh.B, sh.T, sh.C, sh.NH, drop, tile);
        flash_attention_backward_twin(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), sh.B, sh.T, sh.C,
                                      sh.NH, drop, tile);
        INFO("tile " << tile);
        CHECK(worst_ratio(out.data(), out1.data(), out.size(), 1e-13, 1e-11) <= 1.0);
        CHECK(worst_ratio(lse.data(), lse1.data(), lse.size(), 1e-13, 1e-11) <= 1.0);
        CHECK(worst_ratio(dqkv.data(), dqkv1.data(), dqkv.size(), 1e-13, 1e-11) <= 1.0);
    }
}

// The checks can fail: each planted twin is a slip the fast path could make, and the checks above
// must reject it. A rescale bug shows once a row reads a second tile (T > tile); a skipped diagonal
// tile at any T; D from v only in the backward, where finite differences of the correct forward
// disagree with it.
TEST_CASE("flash twin: the checks reject a wrong rescale factor, a skipped diagonal tile, D from the wrong operand",
          "[flash][gradcheck]") {
    for (const TwinCase& tc : {TwinCase{2, 9, 6, 2, 4, 0.0f, 1.0, 31}, TwinCase{2, 11, 8, 4, 3, 0.25f, 2.5, 32}}) {
        INFO(describe(tc));
        CHECK(twin_checks<FlashPlant::None>(tc).ok());  // the harness itself passes the correct twin
        const TwinChecks rescale = twin_checks<FlashPlant::InverseRescale>(tc);
        INFO("inverse rescale: out " << rescale.out << ", " << rescale.grad.str());
        CHECK(rescale.out > 1.0);
        CHECK_FALSE(rescale.ok());
        const TwinChecks diagonal = twin_checks<FlashPlant::SkipDiagonal>(tc);
        INFO("diagonal skipped: out " << diagonal.out << ", dqkv " << diagonal.dqkv);
        CHECK(!(diagonal.out <= 1.0));  // NaN (a first row with no key) fails too
        CHECK_FALSE(diagonal.ok());
        const TwinChecks d = twin_checks<FlashPlant::DFromV>(tc);
        INFO("D from v: " << d.grad.str() << ", dqkv " << d.dqkv);
        CHECK(d.out <= 1.0);  // the forward is right
        CHECK_FALSE(d.grad.ok);
        CHECK(d.dqkv > 1.0);
    }
    // T = 1: only the diagonal tile exists
    CHECK_FALSE(twin_checks<FlashPlant::SkipDiagonal>(TwinCase{1, 1, 6, 2, 1, 0.0f, 1.0, 33}).ok());
}

// ---- the fast float layer against the materialized attention ---------------------------------------------------

namespace {

// The fast float layer and the materialized one on one input: out within 1e-5 and dqkv within 2e-5 of their scale;
// lse within 1e-5 (relative to 1 + |lse|) of the double value on every `every`-th row.
void check_against_materialized(const Shape& sh, const Floats& qkv, const Floats& dout, float p, int every = 1) {
    const Dropout drop{p, 0x5eed};
    const Flash f = run_flash(sh, qkv, dout, drop, drop, false);
    const Materialized a = run_materialized(sh, qkv, dout, drop);
    const double e_out = scaled_error(f.out, a.out), e_dqkv = scaled_error(f.dqkv, a.dqkv);
    const double e_lse = lse_error(sh, qkv, f.lse, every);
    INFO(describe(sh, p) << ": out " << e_out << ", dqkv " << e_dqkv << " of their scale; lse " << e_lse);
    CHECK(e_out <= 1e-5);
    CHECK(e_dqkv <= 2e-5);
    CHECK(e_lse <= 1e-5);
}

}  // namespace

TEST_CASE("flash attention equals the materialized attention on every preset's shapes, with and without dropout",
          "[flash][layers][preset_shapes]") {
    for (const Shape& sh : kPresetShapes)
        for (float p : {0.0f, 0.2f}) {
            const auto qkv = randn<float>(sh.qkv(), 40 + sh.T, 1.5), dout = randn<float>(sh.out(), 41 + sh.T);
            check_against_materialized(sh, qkv, dout, p, sh.T > 256 ? 7 : 1);
        }
}

TEST_CASE("flash attention equals the materialized attention at odd T, T = 1, T not a multiple of the tile, odd heads",
          "[flash][layers]") {
    for (const Shape& sh : kOddShapes)
        for (float p : {0.0f, 0.2f}) {
            const auto qkv = randn<float>(sh.qkv(), 50 + sh.T, 1.5), dout = randn<float>(sh.out(), 51 + sh.T);
            check_against_materialized(sh, qkv, dout, p);
        }
}

TEST_CASE("flash attention equals the materialized attention after rope and QK-norm",
          "[flash][layers][rope][preset_shapes]") {
    for (const Shape& sh : {Shape{4, 64, 128, 4}, Shape{2, 256, 384, 6}, Shape{2, 37, 48, 2}})
        for (bool qk_norm : {false, true}) {
            auto qkv = randn<float>(sh.qkv(), 60 + sh.T, 1.5);
            const auto dout = randn<float>(sh.out(), 61 + sh.T);
            Floats cos(size_t(sh.T) * sh.hs() / 2), sin(cos.size()), rstd(size_t(sh.B) * sh.T * 2 * sh.NH);
            rope_table(cos.data(), sin.data(), sh.T, sh.hs());
            rope_forward(qkv.data(), cos.data(), sin.data(), sh.B, sh.T, sh.C, sh.NH);
            if (qk_norm) qknorm_forward(qkv.data(), rstd.data(), sh.B, sh.T, sh.C, sh.NH);
            INFO("rope" << (qk_norm ? " and QK-norm" : ""));
            check_against_materialized(sh, qkv, dout, 0.2f);
        }
}

TEST_CASE("flash attention: out, lse and dqkv are written, not added to; the bf16 copies are them rounded",
          "[flash][layers]") {
    const Shape sh{2, 70, 32, 2};  // two row blocks and two key tiles
    const auto qkv = randn<float>(sh.qkv(), 70, 1.5), dout = randn<float>(sh.out(), 71);
    for (bool in_bf16 : {false, true})
        for (float p : {0.0f, 0.3f}) {
            const Dropout drop{p, 7};
            INFO((in_bf16 ? "bf16" : "float") << ", p " << p);
            const Flash a = run_flash(sh, qkv, dout, drop, drop, in_bf16, 7.0f);
            for (float fill : {-3.0f, kNaN}) {  // whatever the buffers and scratch held: the same bits
                const Flash b = run_flash(sh, qkv, dout, drop, drop, in_bf16, fill);
                CHECK(mismatches(a.out, b.out) == 0);
                CHECK(mismatches(a.lse, b.lse) == 0);
                CHECK(mismatches(a.dqkv, b.dqkv) == 0);
            }
            // the backward's contract as the other layers' (tests/layer_checks.h): dqkv written (=)
            const size_t per = in_bf16 ? flash_attention_bf16_scratch(sh.T, sh.C, sh.NH)
                                    : flash_attention_scratch(sh.T, sh.C, sh.NH);
            Floats scratch(per);
            check_writes_and_adds("flash attention", {randn<float>(sh.qkv(), 72)}, {false}, [&](Buffers& g) {
                if (in_bf16)
                    flash_attention_backward_bf16(g[0].data(), nullptr, scratch.data(), per, dout.data(), qkv.data(),
                                                  a.out16.data(), a.lse.data(), sh.B, sh.T, sh.C, sh.NH, drop);
                else
                    flash_attention_backward(g[0].data(), scratch.data(), per, dout.data(), qkv.data(), a.out.data(),
                                             a.lse.data(), sh.B, sh.T, sh.C, sh.NH, drop);
            });
        }
}

// The bf16 copies are bf16_from_float's bits even where the result is subnormal, which the CPU's own
// rounding (AVX512_BF16) would write as 0: q = k = 0, so every key weighs 1, and v just above the
// normal range, so the mean over the keys lands below it.
TEST_CASE("flash attention in bf16: the rounded copies of subnormal results are bf16_from_float's",
          "[flash][bf16]") {
    const Shape sh{2, 70, 32, 2};
    Floats qkv(sh.qkv(), 0.0f);
    const auto v = randn<float>(sh.qkv(), 73, 1e-37);
    for (size_t n = 0; n < size_t(sh.B) * sh.T; n++)
        for (int i = 2 * sh.C; i < 3 * sh.C; i++) qkv[n * 3 * sh.C + i] = v[n * 3 * sh.C + i];
    const auto dout = randn<float>(sh.out(), 74);
    for (FlashProducts products : {FlashProducts::Bf16Widened, FlashProducts::Bf16Dot}) {
        INFO((products == FlashProducts::Bf16Dot ? "dot products" : "widened"));
        const Flash r = run_flash(sh, qkv, dout, Dropout{}, Dropout{}, true, kNaN, products);  // checks the bits
        const auto subnormal = std::count_if(r.out.begin(), r.out.end(),
                                             [](float x) { return std::fpclassify(x) == FP_SUBNORMAL; });
        CHECK(subnormal > 100);  // the case is really there
    }
}

TEST_CASE("flash attention rejects bad arguments with hg::Error", "[flash][layers]") {
    Floats f(1 << 16);
    std::vector<bf16> f16(1 << 16);
    float* x = f.data();
    bf16* h = f16.data();
    const size_t n = f.size();
    CHECK_THROWS_AS(flash_attention_forward(x, x, x, n, x, 2, 3, 6, 4, Dropout{}), Error);  // C % NH
    CHECK_THROWS_AS(flash_attention_forward(x, x, x, n, x, 0, 3, 6, 2, Dropout{}), Error);
    CHECK_THROWS_AS(flash_attention_forward(x, x, x, n, x, 2, -1, 6, 2, Dropout{}), Error);
    CHECK_THROWS_AS(flash_attention_backward(x, x, n, x, x, x, x, 2, 3, 6, 2, Dropout{1.0f, 1}), Error);
    CHECK_THROWS_AS(flash_attention_forward(x, x, nullptr, n, x, 2, 3, 6, 2, Dropout{}), Error);
    CHECK_THROWS_AS(flash_attention_forward(x, x, x, flash_attention_scratch(3, 6, 2) - 1, x, 2, 3, 6, 2, Dropout{}),
                    Error);
    CHECK_THROWS_AS(flash_attention_backward_bf16(x, nullptr, x, 16, x, x, h, x, 2, 3, 6, 2, Dropout{}), Error);
    CHECK_THROWS_AS(flash_attention_backward(nullptr, x, n, x, x, x, x, 2, 3, 6, 2, Dropout{}), Error);  // no dqkv
    CHECK_THROWS_AS(flash_attention_backward_bf16(nullptr, nullptr, x, n, x, x, h, x, 2, 3, 6, 2, Dropout{},
                                                  FlashProducts::Bf16Widened),
                    Error);  // neither gradient
    CHECK_THROWS_AS(flash_attention_forward_bf16(x, h, x, x, n, x, 2, 3, 6, 2, Dropout{}, FlashProducts::Float), Error);
    // the bf16 layer's rounded out: the forward must write it, the backward must have it
    CHECK_THROWS_AS(flash_attention_forward_bf16(x, nullptr, x, x, n, x, 2, 3, 6, 2, Dropout{}), Error);
    CHECK_THROWS_AS(flash_attention_backward_bf16(x, nullptr, x, n, x, x, nullptr, x, 2, 3, 6, 2, Dropout{}), Error);
    CHECK_THROWS_AS(flash_attention_scratch(3, 6, 4), Error);
    double d[64] = {};
    CHECK_THROWS_AS(flash_attention_forward_twin(d, d, d, 1, 2, 4, 2, Dropout{}, 0), Error);  // tile 0
    CHECK_THROWS_AS(flash_attention_backward_twin(d, d, d, d, d, 1, 2, 4, 3, Dropout{}, 2), Error);
    CHECK_THROWS_WITH(flash_attention_forward(x, x, x, n, x, 2, 3, 6, 4, Dropout{}),
                      Catch::Contains("divisible"));
}

// ---- the kernels against the twin on every SIMD target ------------------------------------------------

// The row pass's exponentials (lib/kernels/exp-inl.h) against exp in double of the same float
// exponent, on every target: within 4ε relative (ε = 2⁻²⁴; the bf16 bound above counts Exp's error
// as 4ε) down to -126·ln 2, 0 below it and past n, and the returned sum theirs.
// Exponents from -100 to 0.5 (the backward's can pass 0 by the roundings of lse); measured worst
// here: 2.4ε on every target (2.9ε over 12.8 million random ones, a scratch run).
TEST_CASE("the flash row pass's exp is within 4 roundings of exp on every SIMD target", "[flash][simd]") {
    constexpr double kEps = 5.9604644775390625e-8;  // 2⁻²⁴
    constexpr int kWidth = 64;
    for_each_target([&](const std::string& target) {
        double worst = 0;
        for (int row = 0; row < 400; row++) {
            const int n = 1 + row % kWidth;
            const float scale = row % 2 ? 0.125f : 1.0f, shift = row % 3 ? 0.0f : 3.0f;
            std::vector<float> x(kWidth), p(kWidth, -1.0f);
            for (int j = 0; j < kWidth; j++)  // exponents spread over [-100, 0.5]
                x[j] = (0.5f - 100.5f * float((j * 37 + row * 11) % 1009) / 1008.0f + shift) / scale;
            const float sum = flash_exp_row(p.data(), x.data(), n, kWidth, scale, shift);
            double want_sum = 0;
            for (int j = 0; j < kWidth; j++) {
                if (j >= n) {
                    CHECK(p[j] == 0.0f);
                    continue;
                }
                const float z = x[j] * scale - shift;  // the kernel's exponent, in float
                const double e = std::exp(double(z));
                want_sum += p[j];
                if (z >= -87.33654f) {
                    worst = std::max(worst, std::fabs(p[j] - e) / e / kEps);
                } else {
                    INFO(target << ": exp(" << z << ") gave " << p[j]);
                    CHECK(p[j] == 0.0f);
                }
            }
            INFO(target << ": sum " << sum << " against " << want_sum);
            CHECK(std::fabs(sum - want_sum) <= 1e-6 * (want_sum + 1e-30) * n);
        }
        INFO(target << ": worst relative error " << worst << " ε");
        CHECK(worst <= 4.0);
    });
}

TEST_CASE("flash kernels match the scalar twin on every SIMD target, float and bf16", "[flash][simd]") {
    for (const Shape& sh : {Shape{2, 70, 32, 2}, Shape{1, 1, 16, 1}, Shape{1, 45, 24, 2}, Shape{1, 130, 64, 1}})
        for (float p : {0.0f, 0.25f}) {
            const Dropout drop{p, 9};
            const auto qkv = randn<float>(sh.qkv(), 80 + sh.T, 1.5), dout = randn<float>(sh.out(), 81 + sh.T);
            const Doubles qkv_d = to_double(qkv), dout_d = to_double(dout);
            Doubles out(sh.out()), lse(sh.lse()), dqkv(sh.qkv());
            flash_attention_forward_twin(out.data(), lse.data(), qkv_d.data(), sh.B, sh.T, sh.C, sh.NH, drop,
                                         kFlashTile);
            flash_attention_backward_twin(dqkv.data(), dout_d.data(), qkv_d.data(), out.data(), lse.data(), sh.B,
                                          sh.T, sh.C, sh.NH, drop, kFlashTile);
            for_each_target([&](const std::string& target) {
                const Flash f = run_flash(sh, qkv, dout, drop, drop, false);
                const Flash g = run_flash(sh, qkv, dout, drop, drop, true);
                const double e_out = scaled_error(f.out, out), e_lse = scaled_error(f.lse, lse, 1.0),
                             e_dqkv = scaled_error(f.dqkv, dqkv);
                const double b_out = scaled_error(g.out, out), b_dqkv = scaled_error(g.dqkv, dqkv);
                INFO(target << ", " << describe(sh, p) << ": float out " << e_out << ", lse " << e_lse << ", dqkv "
                            << e_dqkv << "; bf16 out " << b_out << ", dqkv " << b_dqkv << " of their scale");
                CHECK(e_out <= 2e-6);
                CHECK(e_lse <= 2e-6);
                CHECK(e_dqkv <= 4e-6);
                CHECK(b_out <= 3e-2);  // a bf16 layer, not a broken one: the bound's test is below
                CHECK(b_dqkv <= 3e-2);
            });
        }
}

// ---- bf16: the bound -------------------------------------------------------------------------------

namespace {

// The worst |got − exact| / bound over out, lse and dqkv (each its own), from the derivation at the top.
// A run that kept the rounded out (r.out16) read it for D.
struct Worst {
    double out = 0, lse = 0, dqkv = 0;
};

Worst check_bound(const Shape& sh, const Floats& qkv, const Floats& dout, Dropout drop, const Flash& r, double u_in) {
    const int B = sh.B, T = sh.T, C = sh.C, NH = sh.NH, hs = sh.hs();
    const size_t C3 = 3 * size_t(C);
    const double u = kU, eps = kEps, scale = 1.0 / std::sqrt(double(hs));
    const double u_prod = 2 * u_in + u_in * u_in;
    Doubles dqkv(qkv.size(), 0.0), bound_dqkv(qkv.size(), 0.0);
    Worst w;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const size_t bh = size_t(b) * NH + h;
            const AttentionHead x{qkv, dout, b, h, T, C, NH};
            for (int t = 0; t < T; t++) {
                const size_t row = (bh * T + t) * T;
                Doubles S(t + 1), e(t + 1), A(t + 1);
                double E = 0, R = 0, mx = -1e300;
                for (int s = 0; s <= t; s++) {
                    double dot = 0, mag = 0;
                    for (int i = 0; i < hs; i++) dot += x.q(t, i) * x.k(s, i), mag += std::fabs(x.q(t, i) * x.k(s, i));
                    S[s] = dot * scale, e[s] = (u_prod + (hs + 3) * eps) * mag * scale;
                    mx = std::max(mx, S[s]), E = std::max(E, e[s]), R = std::max(R, std::fabs(S[s]));
                }
                R += E;
                double sum = 0;
                for (int s = 0; s <= t; s++) sum += std::exp(S[s] - mx);
                const double lse = mx + std::log(sum);
                const int tiles = t / kFlashTile + 1;
                const double gamma = (T + 16 + 4 * tiles + 4 * (tiles + 1) * R) * eps;
                const double alpha = (1 + gamma) * std::exp(2 * E) - 1, pi = (1 + alpha) * (1 + eps) * (1 + u) - 1;
                const double lambda = E + 2 * gamma + 2 * eps * (std::fabs(lse) + 1);
                w.lse = std::max(w.lse, bound_ratio(r.lse[bh * T + t], lse, lambda));
                Doubles P(t + 1), out_t(hs), bound_out(hs);
                for (int s = 0; s <= t; s++)
                    A[s] = std::exp(S[s] - lse), P[s] = A[s] * attention_dropout_factor<double>(drop, row + s);
                for (int i = 0; i < hs; i++) {
                    double mag = 0;
                    for (int s = 0; s <= t; s++) out_t[i] += P[s] * x.v(s, i), mag += P[s] * std::fabs(x.v(s, i));
                    bound_out[i] = ((1 + pi) * (1 + u_in) * (1 + (T + 3) * eps) - 1) * mag;
                    w.out = std::max(w.out, bound_ratio(r.out[(size_t(b) * T + t) * C + size_t(h) * hs + i], out_t[i],
                                                  bound_out[i]));
                }
                // the backward of row t
                double D = 0, dD = 0, mag_D = 0;
                for (int i = 0; i < hs; i++) {
                    const double b_in =
                        r.out16.empty() ? bound_out[i] : (1 + u) * bound_out[i] + u * std::fabs(out_t[i]);
                    D += x.dy(t, i) * out_t[i];
                    dD += std::fabs(x.dy(t, i)) * b_in;
                    mag_D += std::fabs(x.dy(t, i)) * (std::fabs(out_t[i]) + b_in);
                }
                dD += (hs + 1) * eps * mag_D;
                for (int s = 0; s <= t; s++) {
                    double dP = 0, mag = 0;
                    for (int i = 0; i < hs; i++) dP += x.dy(t, i) * x.v(s, i), mag += std::fabs(x.dy(t, i) * x.v(s, i));
                    const double f = attention_dropout_factor<double>(drop, row + s);
                    const double eta = (u_prod + (hs + 1) * eps) * mag;
                    const double zeta = f * ((1 + 2 * eps) * eta + 2 * eps * std::fabs(dP));
                    const double dA = f * dP, dS = A[s] * (dA - D);
                    const double exponent = e[s] + lambda + eps * (std::fabs(S[s]) + std::fabs(lse) + e[s] + lambda);
                    const double beta = std::exp(exponent) * (1 + 4 * eps) - 1;
                    const double pi_b = (1 + beta) * (1 + eps) * (1 + u) - 1;
                    const double kappa = zeta + dD + eps * (std::fabs(dA) + zeta + std::fabs(D) + dD);
                    const double big = std::fabs(dA - D) + kappa;
                    const double sigma =
                        (beta * A[s] * big + A[s] * kappa) * scale + 4 * eps * (1 + beta) * A[s] * big * scale;
                    const double tau = sigma * (1 + u) + u * std::fabs(dS) * scale;
                    const double c = tau * (1 + u_in) + u_in * std::fabs(dS) * scale +
                                     (2 * T + 3) * eps * (std::fabs(dS) * scale + tau) * (1 + u_in);
                    const double cv = (1 + pi_b) * (1 + u_in) * (1 + 2 * T * eps) - 1;
                    for (int i = 0; i < hs; i++) {
                        const size_t qt = (size_t(b) * T + t) * C3 + size_t(h) * hs + i;
                        const size_t ks = (size_t(b) * T + s) * C3 + C + size_t(h) * hs + i;
                        const size_t vs = ks + C;
                        dqkv[qt] += dS * x.k(s, i) * scale, bound_dqkv[qt] += c * std::fabs(x.k(s, i));
                        dqkv[ks] += dS * x.q(t, i) * scale, bound_dqkv[ks] += c * std::fabs(x.q(t, i));
                        dqkv[vs] += P[s] * x.dy(t, i), bound_dqkv[vs] += cv * P[s] * std::fabs(x.dy(t, i));
                    }
                }
            }
        }
    for (size_t i = 0; i < dqkv.size(); i++) w.dqkv = std::max(w.dqkv, bound_ratio(r.dqkv[i], dqkv[i], bound_dqkv[i]));
    return w;
}

const Shape kBoundShapes[] = {
    {2, 130, 128, 2},  // hs 64, three row blocks, the last of 2 rows
    {1, 70, 48, 4},    // hs 12: no whole number of vectors
    {2, 64, 128, 4},   // the course model's heads
    {1, 45, 10, 2},    // odd hs (5): pairs padded with a zero
};

}  // namespace

TEST_CASE("flash attention in bf16: out, lse and dqkv within the bound from u, ε and K; float far below it",
          "[flash][bf16]") {
    for (const Shape& sh : kBoundShapes)
        for (float p : {0.0f, 0.25f})
            for (FlashProducts products : {FlashProducts::Bf16Widened, FlashProducts::Bf16Dot}) {
                const Dropout drop{p, 0x5eed};
                const auto qkv = randn<float>(sh.qkv(), 40 + sh.T, 1.5), dout = randn<float>(sh.out(), 41 + sh.T);
                const Flash bf16_run = run_flash(sh, qkv, dout, drop, drop, true, kNaN, products);
                const Worst w = check_bound(sh, qkv, dout, drop, bf16_run, kU);
                const Worst f = check_bound(sh, qkv, dout, drop, run_flash(sh, qkv, dout, drop, drop, false), kU);
                const bool dot = products == FlashProducts::Bf16Dot && flash_bf16_dot_available();
                INFO(describe(sh, p) << (dot ? ", dot products" : ", widened") << ": worst of the bound, bf16 out "
                                     << w.out << ", lse " << w.lse << ", dqkv " << w.dqkv << "; float out " << f.out
                                     << ", lse " << f.lse << ", dqkv " << f.dqkv);
                CHECK(w.out <= 1.0);
                CHECK(w.lse <= 1.0);
                CHECK(w.dqkv <= 1.0);
                CHECK(w.out > 0.02);  // the inputs really were rounded: the float layer sits far below
                CHECK(w.dqkv > 0.02);
                CHECK(f.out < 0.02);
                CHECK(f.dqkv < 0.02);
                CHECK(f.lse < 0.02);
            }
}

// The bound check can fail: each planted slip lands outside it.
TEST_CASE("flash attention in bf16: the bound check rejects planted bugs", "[flash][bf16]") {
    const Shape sh{2, 130, 128, 2};
    const Dropout drop{0.25f, 0x5eed}, other{0.25f, 0x5eee};
    const auto qkv = randn<float>(sh.qkv(), 170, 1.5), dout = randn<float>(sh.out(), 171);
    // the scale 1/√hs applied twice (q arriving pre-scaled): the scores, so everything, move
    Floats q_scaled = qkv;
    for (size_t n = 0; n < size_t(sh.B) * sh.T; n++)
        for (int i = 0; i < sh.C; i++) q_scaled[n * 3 * sh.C + i] /= std::sqrt(float(sh.hs()));
    const Worst twice = check_bound(sh, qkv, dout, drop, run_flash(sh, q_scaled, dout, drop, drop, true), kU);
    CHECK(twice.out > 1.0);
    CHECK(twice.lse > 1.0);
    // the backward with another dropout mask than the forward's
    const Worst mask = check_bound(sh, qkv, dout, drop, run_flash(sh, qkv, dout, drop, other, true), kU);
    CHECK(mask.out <= 1.0);
    CHECK(mask.dqkv > 1.0);
    // dout read with the wrong sign
    Floats flipped = dout;
    for (float& x : flipped) x = -x;
    CHECK(check_bound(sh, qkv, dout, drop, run_flash(sh, qkv, flipped, drop, drop, true), kU).dqkv > 1.0);
}

// The CPU's bf16 dot products and the widened products: the same exact products summed in another
// order (pairs, odd then even, against k in order), so with inputs that are bf16 numbers already both
// sit within the bound of P̃'s and dS's rounding alone, and agree to float rounding. Per head, through
// the kernels, on every target (where the dot products do not run, both are widened: the same bits).
TEST_CASE("flash attention in bf16: the CPU's dot products and the widened ones agree", "[flash][bf16][simd]") {
    const Shape sh{1, 130, 64, 1};
    auto qkv = randn<float>(sh.qkv(), 90, 1.5), dout = randn<float>(sh.out(), 91);
    for (float& x : qkv) x = bf16_to_float(bf16_from_float(x));
    for (float& x : dout) x = bf16_to_float(bf16_from_float(x));
    const Dropout drop{0.25f, 0x5eed};
    const int T = sh.T, hs = sh.hs();
    const size_t C3 = 3 * size_t(sh.C);
    for_each_target([&](const std::string& target) {
        std::vector<Flash> runs;
        for (FlashProducts products : {FlashProducts::Bf16Dot, FlashProducts::Bf16Widened}) {
            Flash r{Floats(sh.out()), Floats(sh.lse()), Floats(sh.qkv()), {}};  // D from the float out
            const FlashHead head{T,           hs,           qkv.data(), qkv.data() + sh.C, qkv.data() + 2 * sh.C, C3,
                                 r.out.data(), nullptr,     dout.data(), size_t(sh.C),     r.lse.data(),          drop,
                                 0};
            Floats scratch(flash_head_scratch(T, hs, products), kNaN);
            flash_head_forward(r.out.data(), nullptr, r.lse.data(), head, nullptr, products, scratch.data());
            const FlashGrads grads{r.dqkv.data(), r.dqkv.data() + sh.C, r.dqkv.data() + 2 * sh.C, nullptr, nullptr,
                                   nullptr, C3};
            flash_head_backward(grads, head, nullptr, products, scratch.data());
            const Worst w = check_bound(sh, qkv, dout, drop, r, 0.0);
            INFO(target << ", " << (products == FlashProducts::Bf16Dot ? "Bf16Dot" : "Bf16Widened") << ": worst out "
                        << w.out << ", lse " << w.lse << ", dqkv " << w.dqkv);
            CHECK(w.out <= 1.0);
            CHECK(w.lse <= 1.0);
            CHECK(w.dqkv <= 1.0);
            runs.push_back(r);
        }
        const double d_out = scaled_error(runs[0].out, runs[1].out), d_dqkv = scaled_error(runs[0].dqkv, runs[1].dqkv);
        INFO(target << ", dot products available: " << flash_bf16_dot_available() << "; differences: out " << d_out
                    << ", dqkv " << d_dqkv);
        CHECK(d_out <= 1e-6);
        CHECK(d_dqkv <= 1e-6);
        if (!flash_bf16_dot_available()) {  // both widened
            CHECK(mismatches(runs[0].out, runs[1].out) == 0);
            CHECK(mismatches(runs[0].dqkv, runs[1].dqkv) == 0);
        }
    });
}

// ---- determinism ---------------------------------------------------------------------------------------

#ifdef _OPENMP
TEST_CASE("flash attention: the same bits with 1, 2 and 3 threads, and with scratch for one thread",
          "[flash][layers]") {
    const Shape sh{3, 70, 64, 2};  // 6 (b, h) pairs: uneven over 4 threads
    const auto qkv = randn<float>(sh.qkv(), 100, 1.5), dout = randn<float>(sh.out(), 101);
    for (bool in_bf16 : {false, true}) {
        INFO((in_bf16 ? "bf16" : "float"));
        const Dropout drop{0.2f, 3};
        check_same_bits_with_1_2_3_threads([&] {
            const Flash r = run_flash(sh, qkv, dout, drop, drop, in_bf16);
            return Buffers{r.out, r.lse, r.dqkv};
        });
        // scratch for one thread while the setting says 3: the layer runs on as many as fit
        const int saved = omp_get_max_threads();
        omp_set_num_threads(3);
        const Flash all = run_flash(sh, qkv, dout, drop, drop, in_bf16);
        const size_t per = in_bf16 ? flash_attention_bf16_scratch(sh.T, sh.C, sh.NH)
                                   : flash_attention_scratch(sh.T, sh.C, sh.NH);
        Floats scratch(per), out(sh.out()), lse(sh.lse()), dqkv(sh.qkv());
        std::vector<bf16> out16(sh.out());
        if (in_bf16) {
            flash_attention_forward_bf16(out.data(), out16.data(), lse.data(), scratch.data(), per, qkv.data(), sh.B,
                                         sh.T, sh.C, sh.NH, drop);
            flash_attention_backward_bf16(dqkv.data(), nullptr, scratch.data(), per, dout.data(), qkv.data(),
                                          out16.data(), lse.data(), sh.B, sh.T, sh.C, sh.NH, drop);
        } else {
            flash_attention_forward(out.data(), lse.data(), scratch.data(), per, qkv.data(), sh.B, sh.T, sh.C, sh.NH,
                                    drop);
            flash_attention_backward(dqkv.data(), scratch.data(), per, dout.data(), qkv.data(), out.data(), lse.data(),
                                     sh.B, sh.T, sh.C, sh.NH, drop);
        }
        omp_set_num_threads(saved);
        CHECK(mismatches(all.out, out) == 0);
        CHECK(mismatches(all.lse, lse) == 0);
        CHECK(mismatches(all.dqkv, dqkv) == 0);
    }
}
#endif

// test_gradcheck_layers.cpp — each layer's backward against central differences, in double on
// the scalar twins (tests/gradcheck.h: the loss sum(r ⊙ out) with a random r, rtol 1e-6,
// atol 1e-9), on tiny odd shapes at several input scales with fixed seeds: encoder, LayerNorm,
// GELU, residual, dropout, linear, cross-entropy; and planted wrong backwards the same checks
// must reject. Attention's checks are in test_attention.cpp, with the rest of that layer's tests.
#include "tests/catch.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "lib/layers/crossentropy.h"
#include "lib/layers/dropout.h"
#include "lib/layers/encoder.h"
#include "lib/layers/gelu.h"
#include "lib/layers/layernorm.h"
#include "lib/layers/linear.h"
#include "lib/layers/residual.h"
#include "tests/gradcheck.h"
#include "tests/layer_checks.h"

using namespace hg;
using hg::test::ce_targets;
using hg::test::check_grad;
using hg::test::check_grad_fails;
using hg::test::dot;
using hg::test::gradcheck;
using hg::test::GradCheckResult;
using hg::test::randn;
using Vec = std::vector<double>;

namespace {

// ---- LayerNorm -------------------------------------------------------------------------------

struct LayerNormCase {
    int N, C;
    Vec inp, weight, bias, r;
    bool has_bias = true;
    LayerNormCase(int N_, int C_, double scale, uint64_t seed, bool with_bias)
        : N(N_), C(C_), inp(randn(size_t(N_) * C_, seed, scale)), weight(randn(C_, seed + 1)),
          bias(randn(C_, seed + 2)), r(randn(size_t(N_) * C_, seed + 3)), has_bias(with_bias) {
        for (auto& w : weight) w += 1.0;  // weights near 1, as initialised, but not all equal
    }
    double loss() {
        Vec out(inp.size()), mean(N), rstd(N);
        layernorm_forward_twin(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(),
                               has_bias ? bias.data() : nullptr, N, C);
        return dot(r, out.data());
    }
};

// A LayerNorm backward with one of the three input-gradient terms dropped (planted bug).
enum class LnBug { NoMeanTerm, NoRstdTerm };
void layernorm_backward_buggy(double* dinp, const double* dout, const double* inp,
                              const double* weight, const double* mean, const double* rstd,
                              int N, int C, LnBug bug) {
    for (int n = 0; n < N; n++) {
        const double *dout_n = dout + n * C, *inp_n = inp + n * C;
        double sum_g = 0, sum_gx = 0;
        for (int c = 0; c < C; c++) {
            double g = dout_n[c] * weight[c];
            sum_g += g;
            sum_gx += g * (inp_n[c] - mean[n]) * rstd[n];
        }
        for (int c = 0; c < C; c++) {
            double g = dout_n[c] * weight[c], xhat = (inp_n[c] - mean[n]) * rstd[n];
            double t = bug == LnBug::NoMeanTerm ? g - xhat * sum_gx / C : g - sum_g / C;
            dinp[n * C + c] += rstd[n] * t;
        }
    }
}

}  // namespace

TEST_CASE("LayerNorm backward matches finite differences (dinp, dweight, dbias)",
          "[gradcheck][layernorm]") {
    const int B = 2, T = 3;
    for (int C : {5, 6})
        for (double scale : {0.1, 1.0, 10.0})
            for (bool with_bias : {true, false}) {
                CAPTURE(C, scale, with_bias);
                LayerNormCase k(B * T, C, scale, 100 + C, with_bias);
                Vec out(k.inp.size()), mean(k.N), rstd(k.N);
                layernorm_forward_twin(out.data(), mean.data(), rstd.data(), k.inp.data(),
                                       k.weight.data(), with_bias ? k.bias.data() : nullptr,
                                       k.N, C);
                Vec dinp(k.inp.size()), dweight(C), dbias(C);
                layernorm_backward_twin(dinp.data(), dweight.data(),
                                        with_bias ? dbias.data() : nullptr, k.r.data(),
                                        k.inp.data(), k.weight.data(), mean.data(),
                                        rstd.data(), k.N, C);
                auto loss = [&] { return k.loss(); };
                check_grad("dinp", k.inp, dinp, loss, scale);
                check_grad("dweight", k.weight, dweight, loss);
                if (with_bias) check_grad("dbias", k.bias, dbias, loss);
            }
}

TEST_CASE("LayerNorm: the checker rejects a backward with a dropped term", "[gradcheck][layernorm]") {
    for (LnBug bug : {LnBug::NoMeanTerm, LnBug::NoRstdTerm}) {
        CAPTURE(int(bug));
        LayerNormCase k(6, 5, 1.0, 7, true);
        Vec out(k.inp.size()), mean(k.N), rstd(k.N);
        layernorm_forward_twin(out.data(), mean.data(), rstd.data(), k.inp.data(),
                               k.weight.data(), k.bias.data(), k.N, k.C);
        Vec dinp(k.inp.size());
        layernorm_backward_buggy(dinp.data(), k.r.data(), k.inp.data(), k.weight.data(),
                                 mean.data(), rstd.data(), k.N, k.C, bug);
        check_grad_fails("dinp", k.inp, dinp, [&] { return k.loss(); });
    }
}

// ---- GELU ------------------------------------------------------------------------------------

TEST_CASE("GELU backward matches finite differences (dinp), erf and tanh forms",
          "[gradcheck][gelu]") {
    for (GeluKind kind : {GeluKind::Erf, GeluKind::Tanh})
        for (int C : {5, 6})
            for (double scale : {0.1, 1.0, 10.0}) {
                CAPTURE(kind == GeluKind::Erf ? "erf" : "tanh", C, scale);
                const size_t n = 2 * 3 * C;
                Vec inp = randn(n, 200 + C, scale), r = randn(n, 300 + C), out(n), dinp(n);
                gelu_backward_twin(dinp.data(), inp.data(), r.data(), n, kind);
                check_grad("dinp", inp, dinp, [&] {
                    gelu_forward_twin(out.data(), inp.data(), n, kind);
                    return dot(r, out.data());
                }, scale);
            }
}

TEST_CASE("GELU: the checker rejects a scaled derivative and the other form's derivative",
          "[gradcheck][gelu]") {
    const size_t n = 30;
    Vec inp = randn(n, 11), r = randn(n, 12), out(n);
    auto loss = [&](GeluKind kind) {
        return [&, kind] {
            gelu_forward_twin(out.data(), inp.data(), n, kind);
            return dot(r, out.data());
        };
    };
    for (GeluKind kind : {GeluKind::Erf, GeluKind::Tanh}) {
        CAPTURE(kind == GeluKind::Erf ? "erf" : "tanh");
        Vec scaled(n);
        gelu_backward_twin(scaled.data(), inp.data(), r.data(), n, kind);
        for (auto& g : scaled) g *= 1.1;
        check_grad_fails("derivative x 1.1", inp, scaled, loss(kind));

        const GeluKind other = kind == GeluKind::Erf ? GeluKind::Tanh : GeluKind::Erf;
        Vec mixed(n);
        gelu_backward_twin(mixed.data(), inp.data(), r.data(), n, other);
        check_grad_fails("the other form's derivative", inp, mixed, loss(kind));
    }
}

// ---- Encoder ---------------------------------------------------------------------------------

TEST_CASE("Encoder backward matches finite differences (dwte, dwpe), repeated tokens",
          "[gradcheck][encoder]") {
    const int B = 2, T = 3, V = 4, maxT = 4;
    // token 3 three times, token 1 twice, token 2 never: the scatter must accumulate.
    const std::vector<int> idx = {1, 3, 1, 3, 3, 0};
    for (int C : {5, 6}) {
        CAPTURE(C);
        Vec wte = randn(size_t(V) * C, 400 + C), r = randn(size_t(B) * T * C, 500 + C);
        Vec out(r.size());

        SECTION("learned wpe: dwte and dwpe") {
            Vec wpe = randn(size_t(maxT) * C, 600 + C);
            Vec dwte(wte.size()), dwpe(wpe.size());
            encoder_backward_twin(dwte.data(), dwpe.data(), r.data(), idx.data(), B, T, C);
            auto loss = [&] {
                encoder_forward_twin(out.data(), idx.data(), wte.data(), wpe.data(), B, T, C, V);
                return dot(r, out.data());
            };
            check_grad("dwte", wte, dwte, loss);
            check_grad("dwpe", wpe, dwpe, loss);
            for (int c = 0; c < C; c++) CHECK(dwte[2 * C + c] == 0.0);  // token 2 never occurs
        }
        SECTION("sinusoidal wpe: dwte only (dwpe = null)") {
            Vec wpe(size_t(maxT) * C);
            sinusoidal_table(wpe.data(), maxT, C);
            Vec dwte(wte.size());
            encoder_backward_twin(dwte.data(), static_cast<double*>(nullptr), r.data(),
                                  idx.data(), B, T, C);
            check_grad("dwte", wte, dwte, [&] {
                encoder_forward_twin(out.data(), idx.data(), wte.data(), wpe.data(), B, T, C, V);
                return dot(r, out.data());
            });
        }
        SECTION("the checker rejects a scatter that overwrites instead of accumulating") {
            Vec wpe = randn(size_t(maxT) * C, 600 + C);
            Vec dwte(wte.size());
            for (int bt = 0; bt < B * T; bt++)  // planted bug: = instead of +=
                for (int c = 0; c < C; c++) dwte[idx[bt] * C + c] = r[bt * C + c];
            check_grad_fails("dwte", wte, dwte, [&] {
                encoder_forward_twin(out.data(), idx.data(), wte.data(), wpe.data(), B, T, C, V);
                return dot(r, out.data());
            });
        }
    }
}

// ---- Residual --------------------------------------------------------------------------------

// The model has no residual backward: it relies on a sum passing its gradient unchanged to both
// terms (residual.h). This checks that claim: with loss = r · (a + b), dL/da = dL/db = r.
TEST_CASE("Residual: a sum passes its gradient unchanged to both terms (finite differences)",
          "[gradcheck][residual]") {
    for (int C : {5, 6}) {
        const size_t n = 2 * 3 * C;
        Vec a = randn(n, 700 + C), b = randn(n, 800 + C), r = randn(n, 900 + C), out(n);
        const Vec da = r, db = r;
        auto loss = [&] {
            residual_forward_twin(out.data(), a.data(), b.data(), n);
            return dot(r, out.data());
        };
        check_grad("dinp1", a, da, loss);
        check_grad("dinp2", b, db, loss);
    }
}

// ---- Dropout ---------------------------------------------------------------------------------

TEST_CASE("Dropout backward matches finite differences (dinp), p = 0.3, fixed key",
          "[gradcheck][dropout]") {
    const Dropout drop{0.3f, 0x5eed};
    for (int C : {5, 6}) {
        const size_t n = 2 * 3 * C;
        Vec inp = randn(n, 1000 + C), r = randn(n, 1100 + C), out(n), dinp(n);
        dropout_forward_twin(out.data(), inp.data(), n, drop);
        size_t dropped = std::count(out.begin(), out.end(), 0.0);
        CAPTURE(C, dropped);
        CHECK(dropped > 0);  // the check exercises both kept and dropped entries
        CHECK(dropped < n);
        dropout_backward_twin(dinp.data(), r.data(), n, drop);
        check_grad("dinp", inp, dinp, [&] {
            dropout_forward_twin(out.data(), inp.data(), n, drop);
            return dot(r, out.data());
        });
        // The backward with another key's mask is wrong, and must be caught.
        Vec wrong(n);
        dropout_backward_twin(wrong.data(), r.data(), n, Dropout{0.3f, 0x5eed + 1});
        check_grad_fails("dinp with another key", inp, wrong, [&] {
            dropout_forward_twin(out.data(), inp.data(), n, drop);
            return dot(r, out.data());
        });
    }
}

// ---- Linear ----------------------------------------------------------------------------------

namespace {

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
            hg::linear_forward_twin(out.data(), inp.data(), weight.data(), b, N, C, OC);
            return dot(r, out.data());
        };
        // dL/dout = r for L = sum(r ⊙ out)
        std::vector<double> dinp(inp.size()), dweight(weight.size()), dbias(bias.size());
        hg::linear_backward_twin(dinp.data(), dweight.data(), lc.bias ? dbias.data() : nullptr,
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

// ---- Cross-entropy ---------------------------------------------------------------------------

namespace {

struct CeCase {
    int N, V;
    double scale;
    uint64_t seed;
};
const CeCase kCeCases[] = {
    {5, 7, 1.0, 101}, {5, 7, 0.1, 102}, {5, 7, 4.0, 103}, {3, 1, 1.0, 104}, {6, 11, 1.0, 105}};

enum class CeBug { None, NoOnehot, NoMean };

GradCheckResult ce_gradcheck(const CeCase& cc, double dloss, CeBug bug) {
    const int N = cc.N, V = cc.V;
    auto logits = randn((size_t)N * V, cc.seed, cc.scale);
    auto targets = ce_targets(N, V, cc.seed + 7);
    std::vector<double> probs(logits.size()), losses(N);
    // the loss is the layer's own scalar output, scaled by dloss
    auto loss = [&] {
        return dloss * hg::crossentropy_forward_twin(probs.data(), losses.data(), logits.data(),
                                                     targets.data(), N, V);
    };
    loss();
    std::vector<double> dlogits(logits.size());
    hg::crossentropy_backward_twin(dlogits.data(), probs.data(), targets.data(), N, V, dloss);
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

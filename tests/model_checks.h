// model_checks.h — the whole-model gradient check the model tests share.
#pragma once
#include "tests/catch.h"

#include <cstring>
#include <string>
#include <vector>

#include "lib/core/rng.h"
#include "lib/model/gpt.h"
#include "tests/gradcheck.h"

namespace hg::test {

// A tiny model with every parameter randomised (not the init: LayerNorm γ = 1 everywhere could
// hide a swapped term), run in double on the scalar twins. Norm gains (LayerNorm's γ, RMSNorm's
// gain) are drawn around 1, everything else around 0.
inline void randomise(GPT<double>& m, uint64_t seed) {
    Rng rng(seed);
    for (const TensorSpec& t : m.table) {
        const bool ln_weight = t.role == Role::LayerNormWeight;
        double* w = m.params_memory.data() + t.offset;
        for (size_t i = 0; i < t.shape.numel(); i++) w[i] = (ln_weight ? 1.0 : 0.0) + 0.3 * rng.normal();
    }
}

struct ModelGradCheck {
    double worst_ratio = 0;  // the largest error/tolerance over every checked entry: <= 1 passes
    std::string worst_tensor;
};

// Every parameter tensor's gradient (B = 2, T = 3, one ignored target) against central
// differences of the loss, in double, with the attention and recomputation of `plan`; one CHECK
// per tensor. Returns the worst error/tolerance.
inline ModelGradCheck check_model_gradients(GPTConfig c, bool training, ActivationPlan plan = {}) {
    const int B = 2, T = 3;
    GPT<double> m;
    gpt_build<double>(m, c, B, T, nullptr, plan);
    randomise(m, 7);
    std::vector<int> idx = {1, 4, 1, 6, 0, 4};   // repeated tokens exercise the scatter
    std::vector<int> tgt = {4, 1, -1, 0, 4, 2};  // one ignored target
    ForwardMode mode{training, 12345};
    gpt_forward(m, idx.data(), tgt.data(), B, T, mode);
    gpt_zero_grad(m);
    gpt_backward(m, 1.0);
    std::vector<double> analytic(m.grads_memory.data(), m.grads_memory.data() + m.num_parameters);
    auto loss = [&] { return gpt_forward(m, idx.data(), tgt.data(), B, T, mode); };
    ModelGradCheck worst;
    for (const TensorSpec& t : m.table) {
        auto r = gradcheck(m.params_memory.data() + t.offset, t.shape.numel(), analytic.data() + t.offset, loss);
        INFO(t.name << ": " << r.str());
        CHECK(r.ok);
        if (!(r.worst_ratio <= worst.worst_ratio)) worst = {r.worst_ratio, t.name};
    }
    return worst;
}

// Changes token `changed` of a random sequence of block_size tokens (a float model, gpt_init
// seed 1): the logits of every earlier position must stay bit-identical, and position `changed`
// must change.
inline void check_causal(const GPTConfig& c, int changed) {
    const int T = c.block_size;
    GPT<float> m;
    gpt_build(m, c, 1, T);
    gpt_init(m, 1);
    std::vector<int> idx(T);
    Rng rng(3);
    for (int& t : idx) t = int(rng.below(c.vocab_size));
    const size_t V = c.vocab_size;
    gpt_forward(m, idx.data(), nullptr, 1, T);
    std::vector<float> before(m.acts.logits, m.acts.logits + T * V);
    idx[changed] = (idx[changed] + 1) % c.vocab_size;
    gpt_forward(m, idx.data(), nullptr, 1, T);
    for (int t = 0; t < T; t++) {
        const bool same = std::memcmp(&before[t * V], m.acts.logits + t * V, V * sizeof(float)) == 0;
        INFO("position " << t << ", changed token at " << changed);
        if (t < changed) CHECK(same);
        if (t == changed) CHECK_FALSE(same);
    }
}

}  // namespace hg::test

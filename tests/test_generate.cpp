// test_generate.cpp — the cached forward (lib/model/infer.h) against gpt_forward, and generation with
// and without the KV cache (lib/model/generate.h): the same logits to float rounding, the same tokens.
#include "tests/catch.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "lib/core/errors.h"
#include "lib/model/generate.h"
#include "lib/model/infer.h"

using namespace hg;

namespace {

// A small model, so that 40 tokens run past block_size; its config varies by position encoding:
// with rotary positions, every other choice of today's block is on too (RMSNorm, SwiGLU,
// QK-norm, a logit soft cap), and `relu2` swaps SwiGLU for ReLU².
GPTConfig small_config(PosEncoding pos, bool relu2 = false) {
    GPTConfig c;
    c.vocab_size = 29, c.block_size = 16, c.n_layer = 2, c.n_head = 4, c.n_embd = 32;
    c.pos = pos;
    if (pos == PosEncoding::Sinusoidal) {  // the other choices vary too
        c.bias = BiasLayout::GPT2, c.gelu = GeluKind::Tanh;
    }
    if (pos == PosEncoding::Rope) {
        c.norm = NormKind::RMSNorm, c.mlp = relu2 ? MlpKind::ReLU2 : MlpKind::SwiGLU;
        c.qk_norm = true, c.logit_softcap = 3.0f;
    }
    // Spread-out logits, so that sampling is not all one token. (Tied to the N(0, 1) embedding,
    // lm_head would give logits so large that every sequence soon repeats one token.)
    c.init = InitScheme::PyTorch;
    return c;
}

std::vector<int> random_tokens(size_t n, int V, uint64_t seed) {
    Rng rng(seed);
    std::vector<int> ids(n);
    for (int& t : ids) t = int(rng.below(uint64_t(V)));
    return ids;
}

// The N sequences a generator made, each as a vector.
std::vector<std::vector<int>> run_generator(GPT<float>& model, GenerateConfig gc, const std::vector<int>& prompt,
                                            int max_new_tokens) {
    Generator g;
    g.start(model, gc, prompt, max_new_tokens);
    CHECK(g.uses_kv_cache() == gc.kv_cache);
    for (int i = 0; i < max_new_tokens; i++) g.step();
    std::vector<std::vector<int>> out;
    for (int s = 0; s < g.num_samples(); s++) out.emplace_back(g.sequence(s), g.sequence(s) + g.length());
    return out;
}

// Feeds N random sequences of block_size tokens to the cached forward, the first `first`
// positions in one call (as a prompt goes in), then one position per call, and compares the
// logits after each call with gpt_forward's at that position. Returns the largest error.
double check_cached_logits(const GPTConfig& c, int first) {
    const int N = 3, T = c.block_size, V = c.vocab_size;
    GPT<float> model;
    gpt_build(model, c, N, T);
    gpt_init(model, 5);
    const std::vector<int> ids = random_tokens(size_t(N) * T, V, 6);  // (N, T)
    gpt_forward(model, ids.data(), nullptr, N, T);  // logits (N, T, V): position t's sees only 0..t

    InferState s;
    infer_build(s, c, N);
    double max_err = 0, max_logit = 0;
    std::vector<int> chunk(size_t(N) * first);
    for (int t = 0; t < T;) {
        const int P = t == 0 ? first : 1;
        for (int b = 0; b < N; b++) std::copy_n(ids.begin() + size_t(b) * T + t, P, chunk.begin() + size_t(b) * P);
        const float* logits = infer_forward(s, model.params, chunk.data(), P);
        t += P;
        CHECK(s.len == t);
        for (int b = 0; b < N; b++)
            for (int i = 0; i < V; i++) {
                const double want = model.acts.logits[(size_t(b) * T + t - 1) * V + i];
                max_err = std::max(max_err, std::abs(double(logits[size_t(b) * V + i]) - want));
                max_logit = std::max(max_logit, std::abs(want));
            }
    }
    // Float rounding, summed over the blocks: the two paths add the same terms in different
    // orders (sgemm over N·T rows against N rows, attention in other blocks). Measured: 3.6e-7
    // against a largest logit of 1.7 to 2, i.e. about 2e-7 of it; allowed: 1e-5 of it.
    std::printf("kv cache: %s positions, block_size %d, first call %d positions: logits vs gpt_forward: "
                "max |error| %.3g, max |logit| %.3g\n", to_string(c.pos).c_str(), T, first, max_err, max_logit);
    CHECK(max_logit > 1.0);
    CHECK(max_err <= 1e-5 * max_logit);
    // Full: one more position is refused, not written past the cache.
    CHECK_THROWS_AS(infer_forward(s, model.params, chunk.data(), 1), Error);
    infer_reset(s);
    CHECK_THROWS_AS(infer_forward(s, model.params, chunk.data(), 0), Error);
    return max_err;
}

}  // namespace

TEST_CASE("the cached forward's logits are gpt_forward's, to float rounding", "[kvcache][sample]") {
    for (PosEncoding pos : {PosEncoding::Learned, PosEncoding::Sinusoidal, PosEncoding::Rope}) {
        INFO("pos " << to_string(pos));
        check_cached_logits(small_config(pos), 5);
    }
    check_cached_logits(small_config(PosEncoding::Rope, /*relu2=*/true), 5);
    // A first call of more than one block of attention rows (64): a long prompt, a refill.
    GPTConfig c = small_config(PosEncoding::Learned);
    c.block_size = 80;
    check_cached_logits(c, 70);
}

TEST_CASE("generation with the KV cache gives the uncached path's tokens, past block_size too",
          "[kvcache][sample]") {
    const int max_new_tokens = 40;  // block_size 16: 24+ tokens with a cropped, sliding context
    for (const GPTConfig& c : {small_config(PosEncoding::Learned), small_config(PosEncoding::Sinusoidal),
                               small_config(PosEncoding::Rope), small_config(PosEncoding::Rope, true)}) {
        const PosEncoding pos = c.pos;
        GPT<float> model;
        gpt_build(model, c, 1, 1);
        gpt_init(model, 11);
        for (int num_samples : {1, 3})
            for (auto [temperature, top_k] : std::vector<std::pair<float, int>>{{0.0f, 0}, {0.9f, 5}, {1.0f, 0}})
                for (size_t prompt_len : {size_t(1), size_t(3), size_t(20)}) {  // 20: cropped at once
                    INFO("pos " << to_string(pos) << ", num_samples " << num_samples << ", temperature "
                                << temperature << ", top_k " << top_k << ", prompt " << prompt_len);
                    const std::vector<int> prompt = random_tokens(prompt_len, c.vocab_size, 3);
                    GenerateConfig gc;
                    gc.num_samples = num_samples, gc.temperature = temperature, gc.top_k = top_k;
                    gc.seed = 42, gc.kv_cache = true;
                    const auto cached = run_generator(model, gc, prompt, max_new_tokens);
                    gc.kv_cache = false;
                    const auto full = run_generator(model, gc, prompt, max_new_tokens);
                    CHECK(cached == full);
                    // The test is not vacuous: tokens vary along a sequence, and sampled
                    // sequences differ from each other (each has its own generator).
                    const std::vector<int>& first = cached[0];
                    CHECK(std::count(first.end() - max_new_tokens, first.end(), first.back()) < max_new_tokens);
                    if (num_samples > 1 && temperature > 0) CHECK(cached[0] != cached[1]);
                }
    }
}

TEST_CASE("a sample's tokens do not depend on how many are generated with it", "[kvcache][sample]") {
    const GPTConfig c = small_config(PosEncoding::Learned);
    GPT<float> model;
    gpt_build(model, c, 1, 1);
    gpt_init(model, 12);
    GenerateConfig gc;
    gc.temperature = 1.0f, gc.top_k = 0, gc.seed = 9;
    const std::vector<int> prompt{1, 2};
    gc.num_samples = 1;
    const auto alone = run_generator(model, gc, prompt, 30);
    gc.num_samples = 4;
    const auto together = run_generator(model, gc, prompt, 30);
    CHECK(together[0] == alone[0]);
}

TEST_CASE("every preset runs the cached path", "[kvcache][sample]") {
    for (const std::string& name : preset_names()) {
        INFO(name);
        CHECK(infer_unsupported(preset(name)).empty());
    }
}

TEST_CASE("generation refuses bad input in one line", "[kvcache][sample]") {
    const GPTConfig c = small_config(PosEncoding::Learned);
    GPT<float> model;
    gpt_build(model, c, 1, 1);
    Generator g;
    GenerateConfig gc;
    CHECK_THROWS_AS(g.start(model, gc, {}, 5), Error);                 // empty prompt
    CHECK_THROWS_AS(g.start(model, gc, {c.vocab_size}, 5), Error);     // outside the vocabulary
    CHECK_THROWS_AS(g.start(model, gc, {-1}, 5), Error);
    CHECK_THROWS_AS(g.start(model, gc, {1}, -1), Error);
    gc.num_samples = 0;
    CHECK_THROWS_AS(g.start(model, gc, {1}, 5), Error);
    gc.num_samples = 1;
    g.start(model, gc, {1}, 2);
    g.step();
    g.step();
    CHECK_THROWS_AS(g.step(), Error);  // past max_new_tokens
    InferState s;
    CHECK_THROWS_AS(infer_build(s, c, 0), Error);
}

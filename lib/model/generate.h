// generate.h — N continuations of one prompt, generated together, a token per sequence per step.
//
// Each step feeds the model the context of every sequence, takes the logits after its last
// token and draws the next token with sample_token (lib/model/sample.h). The context is the whole
// sequence, cropped to its last block_size tokens once it is longer: the position table has no
// more rows. Two paths compute the logits:
//   kv_cache = true:  the cached forward (lib/model/infer.h). While a sequence fits in block_size, a
//                     step computes only the newest position over the cached keys and values
//                     (the prompt, the first step, goes in as one call). Past block_size the window
//                     slides by one token per step and every position in it moves down one index,
//                     so each such step empties the cache and refills it from the cropped window:
//                     the same work as the full recompute, for the same output.
//   kv_cache = false: gpt_forward over the whole (N, context) window at every step.
// Both give the same logits up to float rounding (tests/test_generate.cpp measures it), and so
// the same tokens unless two candidates are within that rounding of each other.
// A config the cached path does not implement (infer_unsupported) runs the full recompute.
//
// Sample s draws from its own generator, Rng(seed + s): what it draws does not depend on the
// path or on how many sequences are generated with it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lib/core/rng.h"
#include "lib/model/gpt.h"
#include "lib/model/infer.h"

namespace hg {

struct GenerateConfig {
    int num_samples = 1;       // N sequences, generated together
    float temperature = 0.8f;  // as sample_token: <= 0 is greedy
    int top_k = 200;           // as sample_token: <= 0 keeps every token
    uint64_t seed = 1337;
    bool kv_cache = true;      // the cached forward; false: the full recompute every step
};

class Generator {
public:
    // Allocates everything the steps need, for up to max_new_tokens steps; `model` (its
    // parameters) must outlive the generator. hg::Error for an empty prompt, a token outside
    // the vocabulary, num_samples < 1 or max_new_tokens < 0.
    void start(GPT<float>& model, const GenerateConfig& config, const std::vector<int>& prompt,
               int max_new_tokens);
    // Appends one token to each sequence. Allocates nothing. hg::Error after max_new_tokens steps.
    void step();

    bool uses_kv_cache() const { return use_cache_; }
    // Why the full recompute runs although the cache was asked for ("" when it does not).
    const std::string& fallback_reason() const { return fallback_; }
    int num_samples() const { return N_; }
    int length() const { return len_; }  // tokens in each sequence so far, prompt included
    const int* sequence(int s) const { return ids_.data() + size_t(s) * capacity_; }  // (length())
    // The logits the last step drew sequence s's token from (V).
    const float* last_logits(int s) const { return logits_ + size_t(s) * logits_stride_; }

private:
    const float* logits_for_context(int n);

    GPT<float>* model_ = nullptr;
    GenerateConfig config_;
    bool use_cache_ = false;
    std::string fallback_;
    int N_ = 0, len_ = 0, capacity_ = 0;
    std::vector<int> ids_;     // (N, capacity) the sequences, prompt first
    std::vector<int> window_;  // (N, block_size) the tokens of one forward call
    std::vector<Rng> rngs_;    // one per sequence
    InferState cache_;         // the cached path
    int cache_start_ = 0;      // the sequence index of the cache's position 0
    GPT<float> full_;          // the full recompute: a replica of model_ sized (N, block_size)
    const float* logits_ = nullptr;  // the last step's logits, sequence s at s·logits_stride_
    size_t logits_stride_ = 0;
};

}  // namespace hg

// generate.cpp — Generator: the two paths and the context window (see generate.h).
#include "lib/model/generate.h"

#include <algorithm>

#include "lib/core/errors.h"
#include "lib/model/sample.h"

namespace hg {

void Generator::start(GPT<float>& model, const GenerateConfig& config, const std::vector<int>& prompt,
                      int max_new_tokens) {
    const GPTConfig& c = model.config;
    check(config.num_samples >= 1, "num_samples must be at least 1 (got {})", config.num_samples);
    check(max_new_tokens >= 0, "max_new_tokens must be >= 0 (got {})", max_new_tokens);
    check(!prompt.empty(), "the prompt is empty: generation needs at least one token");
    for (int token : prompt)
        check(token >= 0 && token < c.vocab_size, "prompt token {} is outside the vocabulary [0, {})", token,
              c.vocab_size);
    model_ = &model;
    config_ = config;
    N_ = config.num_samples;
    len_ = int(prompt.size());
    capacity_ = len_ + max_new_tokens;
    ids_.assign(size_t(N_) * capacity_, 0);
    for (int s = 0; s < N_; s++) std::copy(prompt.begin(), prompt.end(), ids_.begin() + size_t(s) * capacity_);
    window_.assign(size_t(N_) * c.block_size, 0);
    rngs_.clear();
    for (int s = 0; s < N_; s++) rngs_.emplace_back(config.seed + uint64_t(s));
    fallback_ = config.kv_cache ? infer_unsupported(c) : "";
    use_cache_ = config.kv_cache && fallback_.empty();
    if (use_cache_) {
        infer_build(cache_, c, N_);
        cache_start_ = 0;
    } else {
        gpt_build(full_, c, N_, c.block_size, &model);
    }
    logits_ = nullptr;
}

// The logits after the last of the n context tokens of every sequence (sequence s's at
// logits_ + s·logits_stride_). The context is positions len_-n .. len_-1 of each sequence.
const float* Generator::logits_for_context(int n) {
    const int start = len_ - n, V = model_->config.vocab_size;
    // window_ (N, count) = positions first .. first+count-1 of every sequence
    auto gather = [&](int first, int count) {
        for (int s = 0; s < N_; s++) {
            const int* from = ids_.data() + size_t(s) * capacity_ + first;
            std::copy(from, from + count, window_.begin() + size_t(s) * count);
        }
    };
    if (use_cache_) {
        // The cache holds positions cache_start_ .. cache_start_+cache_.len-1. It serves this
        // context only if that is where the context starts (true until the window slides).
        if (start != cache_start_ || cache_.len >= n) {
            infer_reset(cache_);
            cache_start_ = start;
        }
        const int P = n - cache_.len;
        gather(start + cache_.len, P);
        logits_stride_ = V;
        return infer_forward(cache_, model_->params, window_.data(), P);
    }
    gather(start, n);
    gpt_forward(full_, window_.data(), nullptr, N_, n);
    logits_stride_ = size_t(n) * V;
    return full_.acts.logits + size_t(n - 1) * V;
}

void Generator::step() {
    check(len_ < capacity_, "the generator has made all of its {} tokens already", capacity_);
    const int n = std::min(len_, model_->config.block_size), V = model_->config.vocab_size;
    logits_ = logits_for_context(n);
    for (int s = 0; s < N_; s++)
        ids_[size_t(s) * capacity_ + len_] =
            sample_token(logits_ + size_t(s) * logits_stride_, V, config_.temperature, config_.top_k, rngs_[s]);
    len_++;
}

}  // namespace hg

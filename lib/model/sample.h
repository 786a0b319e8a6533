// sample.h — choosing the next token from the model's logits: greedy, temperature, top-k.
//
// Given logits z (V) for the next position, generation draws one token id from
//   p_i = exp(z_i / T) / Σ_{j ∈ K} exp(z_j / T)   for i ∈ K,   p_i = 0 otherwise,
// where T is the temperature (T → 0: all mass on the largest logit; T = 1: the model's own
// distribution; T > 1: flatter) and K is the set of the top_k largest logits (top-k sampling
// cuts off the long tail of unlikely tokens that, summed, are drawn surprisingly often).
#pragma once
#include "lib/core/rng.h"

namespace hg {

// Returns a token id in [0, V).
//   temperature <= 0 or top_k == 1: greedy, the argmax (the lowest id among equal maxima);
//                                   consumes no random numbers.
//   otherwise: top_k <= 0 or top_k >= V keeps all V tokens; draws with exactly one rng.uniform().
//              Ties at the top-k boundary keep the lowest ids, as greedy does.
// Allocates nothing: the top-k cut is found by a radix select with a 256-bin histogram on the
// stack, and the softmax is recomputed on the fly rather than stored (see sample.cpp).
// Throws hg::Error if V < 1, temperature is NaN or ±inf, a logit is NaN or +inf, or every logit
// is -inf (-inf itself is allowed: it is how a caller masks a token out).
int sample_token(const float* logits, int V, float temperature, int top_k, Rng& rng);  // logits: (V,)

// The knobs a user sets: temperature 0 means greedy (the argmax, no randomness), a positive one
// scales the logits; top_k 0 keeps every token, k > 0 the k most likely. hg::Error for a
// temperature that is negative, NaN or infinite, and for a negative top_k: they mean nothing.
void check_sampling_knobs(float temperature, int top_k);

}  // namespace hg

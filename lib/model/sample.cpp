// sample.cpp — sample_token (the distribution it draws from: sample.h).
//
// The steps, each one pass over the V logits, none of them allocating:
//   1. validate and find the argmax m (greedy returns it here);
//   2. top-k: find the k-th largest logit τ by radix select (below), so that the kept set is
//      K = {i : z_i > τ} plus the lowest-id `take_equal` of {i : z_i = τ}, |K| = k;
//   3. S = Σ_{i∈K} w_i with w_i = exp((z_i − z_m) / T), in double. Subtracting the max first
//      gives w_m = 1 and every other w_i ≤ 1, so nothing overflows however small T is, and
//      dividing the *difference* by T loses less than z_i/T − z_m/T would;
//   4. inverse-CDF draw: u = rng.uniform() ∈ [0, 1); return the first i ∈ K (in id order)
//      whose running sum w_0 + … + w_i exceeds u·S. Token i is returned exactly when u·S lands
//      in an interval of length w_i, i.e. with probability w_i / S = p_i.
// Step 3 and 4 compute the same w_i in the same order, so the running sum of step 4 ends
// at exactly S; only u·S rounding up to S itself can fall off the end, and then the last
// kept token with w_i > 0 is returned (the token whose interval ends at S).
#include "lib/model/sample.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "lib/core/errors.h"

namespace hg {

namespace {

// Maps a float to a uint32 whose unsigned order is the float order:
//   -inf < … < -1 < -0 = +0 < 1 < … < +inf   (NaNs are rejected before we get here).
// Positive floats already order like their bit patterns, so setting the sign bit puts them
// above all negatives; negative floats order backwards, so flipping all bits reverses them.
// x + 0.0f turns -0 into +0 so that the two zeros, equal as numbers, get one key.
uint32_t order_key(float x) {
    x = x + 0.0f;
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// The key τ of the k-th largest logit (counting repeats), and how many logits equal to τ
// belong to the top k (the rest of the top k are strictly greater than τ).
struct TopK {
    uint32_t threshold;
    int take_equal;
};

// Radix select, most significant byte first. Each pass histograms byte `shift` of the keys
// that match the bytes fixed so far, then walks the bins from the top: a whole bin above
// the k-th largest is skipped (its count taken off `need`); the bin holding it fixes the
// next byte. Four passes fix all 32 bits. O(4V), 1 kB of stack, no allocation, exact.
// Invariant: at least `need` keys match the fixed prefix, so the walk always finds a bin.
TopK kth_largest(const float* logits, int V, int k) {
    uint32_t prefix = 0, mask = 0;
    int need = k;
    for (int shift = 24; shift >= 0; shift -= 8) {
        int hist[256] = {0};
        for (int i = 0; i < V; i++) {
            uint32_t key = order_key(logits[i]);
            if ((key & mask) == prefix) hist[(key >> shift) & 0xffu]++;
        }
        int b = 255;
        for (; b > 0 && hist[b] < need; b--) need -= hist[b];
        prefix |= uint32_t(b) << shift;
        mask |= 0xffu << shift;
    }
    return {prefix, need};
}

}  // namespace

void check_sampling_knobs(float temperature, int top_k) {
    check(std::isfinite(temperature) && temperature >= 0,
          "--temperature must be a finite number >= 0, 0 for greedy (got {})", temperature);
    check(top_k >= 0, "--top_k must be >= 0, 0 to keep every token (got {})", top_k);
}

int sample_token(const float* logits, int V, float temperature, int top_k, Rng& rng) {
    check(V >= 1, "sample_token: vocabulary size must be at least 1, got {}", V);
    check(std::isfinite(temperature), "sample_token: temperature must be a finite number, got {}", temperature);

    // 1. Validate; the argmax with the lowest id on ties (strict >).
    int m = 0;
    for (int i = 0; i < V; i++) {
        check(!std::isnan(logits[i]) && logits[i] != INFINITY, "sample_token: logits[{}] is {}", i, logits[i]);
        if (logits[i] > logits[m]) m = i;
    }
    check(logits[m] != -INFINITY, "sample_token: all {} logits are -inf, nothing can be sampled", V);
    if (temperature <= 0.0f || top_k == 1) return m;

    // 2. The kept set K. Keeping all V is the same as a threshold below every key.
    TopK cut{0, V};
    if (top_k > 0 && top_k < V) cut = kth_largest(logits, V, top_k);
    // keep(i) for i in increasing order; `equal_seen` counts the logits equal to τ passed so far.
    auto keep = [&](int i, int& equal_seen) {
        uint32_t key = order_key(logits[i]);
        return key > cut.threshold || (key == cut.threshold && equal_seen++ < cut.take_equal);
    };

    // 3. S = Σ_{i∈K} w_i, w_i = exp((z_i − z_m) / T).
    const double zmax = logits[m], T = temperature;
    double S = 0.0;
    int equal_seen = 0;
    for (int i = 0; i < V; i++)
        if (keep(i, equal_seen)) S += std::exp((double(logits[i]) - zmax) / T);

    // 4. The first i whose running sum exceeds u·S.
    const double target = rng.uniform() * S;
    double running = 0.0;
    int last = m;  // the last kept token with w_i > 0 (w_m = 1, so m qualifies)
    equal_seen = 0;
    for (int i = 0; i < V; i++) {
        if (!keep(i, equal_seen)) continue;
        double w = std::exp((double(logits[i]) - zmax) / T);
        running += w;
        if (w > 0.0) last = i;
        if (target < running) return i;
    }
    return last;
}

}  // namespace hg

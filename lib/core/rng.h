// rng.h — explicit, serialisable random numbers (no global state, no rand()).
//
// Rng is a splitmix64 stream: its whole state is one 64-bit word, so a checkpoint saves it
// exactly and resuming continues the same stream. Each purpose (init, batches, sampling)
// owns its own Rng. Dropout needs no state at all: its masks come from hash_uniform(key, i),
// a pure function, so the backward pass recomputes the forward's mask instead of storing it
// and the result does not depend on how threads split the work.
#pragma once
#include <cmath>
#include <cstdint>

namespace hg {

// splitmix64's output function: a bijective mix of 64 bits (Steele, Lea & Flood, 2014).
inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// Uniform in [0, 1) from a (key, counter) pair: 24 random bits, exact in float.
inline float hash_uniform(uint64_t key, uint64_t i) {
    return float(mix64(key + 0x9e3779b97f4a7c15ULL * (i + 1)) >> 40) * (1.0f / 16777216.0f);
}

struct Rng {
    uint64_t state = 0;

    explicit Rng(uint64_t seed = 0) : state(seed) {}
    uint64_t next_u64() { return mix64(state += 0x9e3779b97f4a7c15ULL); }
    // Skips n draws in O(1), as if next_u64() had been called n times (the state is a counter).
    void discard(uint64_t n) { state += n * 0x9e3779b97f4a7c15ULL; }
    // Uniform in [0, 1) with 53 random bits.
    double uniform() { return double(next_u64() >> 11) * (1.0 / 9007199254740992.0); }
    // Uniform integer in [0, n): Lemire's multiply-shift (bias < n / 2^64, negligible here).
    uint64_t below(uint64_t n) { return uint64_t((__uint128_t(next_u64()) * n) >> 64); }
    // Standard normal by Box-Muller; uses two uniforms, keeps no cached spare.
    double normal() {
        double u1 = 1.0 - uniform();  // (0, 1], so log is finite
        double u2 = uniform();
        return box_muller(u1, u2);
    }
    // Box-Muller's first value from its two uniforms, u1 in (0, 1], u2 in [0, 1).
    static double box_muller(double u1, double u2) {
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    }
};

}  // namespace hg

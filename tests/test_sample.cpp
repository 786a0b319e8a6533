// test_sample.cpp — sample_token: greedy, temperature, top-k, and the distribution it draws from.
#include <algorithm>
#include "tests/catch.h"
#include <cmath>
#include <numeric>
#include <vector>

#include "lib/core/errors.h"
#include "lib/core/rng.h"
#include "lib/model/sample.h"

using namespace hg;

namespace {

std::vector<float> random_logits(int V, uint64_t seed, double scale) {
    Rng rng(seed);
    std::vector<float> z(V);
    for (float& x : z) x = float(scale * rng.normal());
    return z;
}

int first_argmax(const std::vector<float>& z) { return int(std::max_element(z.begin(), z.end()) - z.begin()); }

// The ids of the top k logits, ordered by (logit descending, id ascending): the reference
// for sample_token's kept set, by sorting instead of radix select.
std::vector<int> top_ids(const std::vector<float>& z, int k) {
    std::vector<int> ids(z.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return z[a] > z[b]; });
    if (k > 0 && k < int(z.size())) ids.resize(k);
    return ids;
}

// The distribution sample_token should draw from, computed independently in double.
std::vector<double> reference_probs(const std::vector<float>& z, double T, int k) {
    std::vector<double> p(z.size(), 0.0);
    const std::vector<int> kept = top_ids(z, k);
    double zmax = z[kept[0]], sum = 0;
    for (int i : kept) sum += p[i] = std::exp((z[i] - zmax) / T);
    for (double& x : p) x /= sum;
    return p;
}

// The largest |count_i / n − p_i| in standard errors sqrt(p_i (1 − p_i) / n); a token with
// p_i = 0 that was drawn at all counts as infinitely far off.
double worst_z(const std::vector<int>& counts, const std::vector<double>& p, int n) {
    double worst = 0;
    for (size_t i = 0; i < p.size(); i++) {
        double f = double(counts[i]) / n;
        if (p[i] == 0.0) {
            if (counts[i] > 0) return INFINITY;
            continue;
        }
        worst = std::max(worst, std::fabs(f - p[i]) / std::sqrt(p[i] * (1 - p[i]) / n));
    }
    return worst;
}

std::vector<int> histogram(const std::vector<float>& z, float T, int k, int n, uint64_t seed) {
    Rng rng(seed);
    std::vector<int> counts(z.size(), 0);
    for (int s = 0; s < n; s++) counts.at(sample_token(z.data(), int(z.size()), T, k, rng))++;
    return counts;
}

}  // namespace

TEST_CASE("sample_token greedy is the argmax, lowest id on ties, and draws nothing", "[sample]") {
    for (uint64_t seed = 1; seed <= 20; seed++) {
        const std::vector<float> z = random_logits(97, seed, 3.0);
        Rng rng(seed);
        const uint64_t state = rng.state;
        CHECK(sample_token(z.data(), 97, 0.0f, 0, rng) == first_argmax(z));
        CHECK(sample_token(z.data(), 97, -1.0f, 50, rng) == first_argmax(z));
        CHECK(sample_token(z.data(), 97, 1.0f, 1, rng) == first_argmax(z));  // top_k = 1
        CHECK(rng.state == state);
    }
    const std::vector<float> ties = {1, 5, 2, 5, 5, -3};
    Rng rng(7);
    CHECK(sample_token(ties.data(), 6, 0.0f, 0, rng) == 1);
    const std::vector<float> one = {-INFINITY, -INFINITY, 0.5f, -INFINITY};
    CHECK(sample_token(one.data(), 4, 0.0f, 0, rng) == 2);
    CHECK(sample_token(one.data(), 4, 1.0f, 0, rng) == 2);  // the only finite logit
    const float single = 3.0f;
    CHECK(sample_token(&single, 1, 1.0f, 0, rng) == 0);
}

TEST_CASE("sample_token at a tiny temperature is the argmax", "[sample]") {
    // Distinct logits 0.01 apart in a shuffled order: at T = 1e-4 the runner-up has
    // probability below exp(-100).
    const int V = 50;
    std::vector<float> z(V);
    Rng shuffle(3);
    for (int i = 0; i < V; i++) z[i] = 0.01f * float(i);
    for (int i = V - 1; i > 0; i--) std::swap(z[i], z[shuffle.below(i + 1)]);
    Rng rng(11);
    for (float T : {1e-4f, 1e-20f, 1e-38f, 1e-45f})
        for (int s = 0; s < 500; s++) REQUIRE(sample_token(z.data(), V, T, 0, rng) == first_argmax(z));
}

TEST_CASE("sample_token draws exactly one uniform per sampled token", "[sample]") {
    const std::vector<float> z = random_logits(40, 5, 1.0);
    Rng rng(99), twin(99);
    for (int s = 0; s < 100; s++) {
        sample_token(z.data(), 40, 0.9f, (s % 3) * 7, rng);
        twin.uniform();
        REQUIRE(rng.state == twin.state);
    }
}

TEST_CASE("sample_token top_k never picks outside the top k", "[sample]") {
    const int V = 64;
    const std::vector<float> z = random_logits(V, 17, 2.0);
    for (int k : {2, 5, 17, 63}) {
        const std::vector<int> top = top_ids(z, k);
        std::vector<bool> allowed(V, false);
        for (int i : top) allowed[i] = true;
        // T = 10 flattens the kept set so that every one of the k is drawn too.
        const std::vector<int> counts = histogram(z, 10.0f, k, 5000, 1234 + k);
        INFO("k = " << k);
        for (int i = 0; i < V; i++) {
            if (!allowed[i]) CHECK(counts[i] == 0);
            if (allowed[i]) CHECK(counts[i] > 0);
        }
    }
    // Ties at the boundary: the lowest ids among equal logits are kept.
    const std::vector<float> ties = {0, 3, 3, 3, 1, 3, 3};
    for (auto [k, expect] : std::vector<std::pair<int, std::vector<int>>>{
             {2, {1, 2}}, {4, {1, 2, 3, 5}}, {5, {1, 2, 3, 5, 6}}, {6, {1, 2, 3, 4, 5, 6}}}) {
        const std::vector<int> counts = histogram(ties, 1.0f, k, 4000, 77);
        std::vector<int> drawn;
        for (int i = 0; i < 7; i++)
            if (counts[i] > 0) drawn.push_back(i);
        INFO("k = " << k);
        CHECK(drawn == expect);
    }
}

TEST_CASE("sample_token top_k selection is exact with many repeats, -0 and -inf", "[sample]") {
    // 400 logits from only a few values, so the k-th largest sits inside a long run of
    // equal values; at T = 1e30 every kept token has weight ~1, so the draw is uniform over
    // the kept set and 12,000 draws hit each of them (expected at least ~35 times each).
    const int V = 400;
    const float values[] = {-2.0f, -1.0f, -0.0f, 0.0f, 1.0f, 2.5f, -INFINITY};
    Rng pick(5);
    std::vector<float> z(V);
    for (float& x : z) x = values[pick.below(7)];
    for (int k : {1, 3, 50, 150, 399}) {
        // The reference set: sort by value (with -0 == +0, as the comparison does), then id.
        const std::vector<int> top = top_ids(z, k);
        std::vector<int> counts = histogram(z, 1e30f, k, k == 1 ? 100 : 12000, 42 + k);
        std::vector<int> drawn;
        for (int i = 0; i < V; i++)
            if (counts[i] > 0) drawn.push_back(i);
        std::vector<int> expect;
        for (int i : top)
            if (z[i] != -INFINITY) expect.push_back(i);  // weight 0: kept but never drawn
        std::sort(expect.begin(), expect.end());
        INFO("k = " << k << ", k-th value " << z[top.back()]);
        CHECK(drawn == expect);
    }
}

TEST_CASE("sample_token frequencies match the softmax probabilities", "[sample]") {
    const std::vector<float> z = {2.0f, 1.0f, 0.5f, 0.0f, -0.3f, -1.0f, -2.0f, 1.2f};
    const int n = 20000;
    for (auto [T, k] : std::vector<std::pair<float, int>>{{1.0f, 0}, {0.8f, 0}, {0.8f, 5}, {1.7f, 3}, {1.0f, 8}}) {
        const std::vector<double> p = reference_probs(z, T, k);
        const std::vector<int> counts = histogram(z, T, k, n, 2024);
        const double worst = worst_z(counts, p, n);
        INFO("T = " << T << ", k = " << k << ": worst deviation " << worst << " standard errors");
        CHECK(worst < 4.0);
        // The check can fail: the same draws are far from the distribution at another temperature.
        const std::vector<double> wrong = reference_probs(z, T * 1.25, k);
        CHECK(worst_z(counts, wrong, n) > 6.0);
    }
}

TEST_CASE("sample_token top_k <= 0 or >= V keeps all tokens", "[sample]") {
    const std::vector<float> z = random_logits(30, 8, 1.5);
    for (int k : {-5, 0, 30, 31, 1000}) {
        Rng a(3), b(3);
        for (int s = 0; s < 300; s++)
            REQUIRE(sample_token(z.data(), 30, 1.1f, k, a) == sample_token(z.data(), 30, 1.1f, 0, b));
    }
}

TEST_CASE("sample_token is reproducible from the seed", "[sample]") {
    const std::vector<float> z = random_logits(100, 9, 1.0);
    auto sequence = [&](uint64_t seed) {
        Rng rng(seed);
        std::vector<int> s(200);
        for (int& t : s) t = sample_token(z.data(), 100, 1.0f, 10, rng);
        return s;
    };
    CHECK(sequence(42) == sequence(42));
    CHECK(sequence(42) != sequence(43));
}

TEST_CASE("sample_token rejects bad input", "[sample]") {
    Rng rng(1);
    const std::vector<float> z = {1, 2, 3};
    using Catch::Matchers::Contains;
    CHECK_THROWS_WITH(sample_token(z.data(), 0, 1.0f, 0, rng), Contains("vocabulary size must be at least 1, got 0"));
    CHECK_THROWS_WITH(sample_token(z.data(), 3, NAN, 0, rng), Contains("temperature must be a finite number, got nan"));
    CHECK_THROWS_WITH(sample_token(z.data(), 3, INFINITY, 0, rng), Contains("temperature"));
    const std::vector<float> has_nan = {1, NAN, 3};
    CHECK_THROWS_WITH(sample_token(has_nan.data(), 3, 1.0f, 0, rng), Contains("logits[1] is nan"));
    CHECK_THROWS_WITH(sample_token(has_nan.data(), 3, 0.0f, 0, rng), Contains("logits[1] is nan"));
    const std::vector<float> has_inf = {1, 2, INFINITY};
    CHECK_THROWS_WITH(sample_token(has_inf.data(), 3, 1.0f, 0, rng), Contains("logits[2] is inf"));
    const std::vector<float> all_masked = {-INFINITY, -INFINITY};
    CHECK_THROWS_WITH(sample_token(all_masked.data(), 2, 1.0f, 0, rng), Contains("all 2 logits are -inf"));
    CHECK_THROWS_AS(sample_token(all_masked.data(), 2, 1.0f, 0, rng), Error);
}

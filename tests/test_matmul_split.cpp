// The parts a product is cut into over threads (lib/kernels/matmul_split.h), checked on the
// plan itself for thread counts this machine does not have: every term of every entry of c in
// exactly one part, K cut only by the stated rule, the work even across the threads, and the
// numbers each thread streams falling as the threads grow. The products split for real, on odd
// sizes and several thread counts, are checked in test_matmul_backends.cpp.
#include "tests/catch.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "lib/core/rng.h"
#include "lib/kernels/matmul_split.h"

using namespace hg;

namespace {

struct Product {
    std::string name;
    int M, N, K;
    bool weight_gradient;  // c is a weight's gradient: K = B·T terms
};

// The products a model makes outside our parallel regions (one model, every thread on each
// layer): each linear layer's forward (x·Wᵀ), input gradient (dout·W) and weight gradient
// (doutᵀ·x), the language-model head included. Attention's products run inside its loop over
// (batch, head) pairs, one thread each, and are not split.
std::vector<Product> model_products(const std::string& model, int BT, int C, int V) {
    std::vector<Product> out;
    const struct { const char* name; int in, out; } linears[] = {
        {"c_attn", C, 3 * C}, {"attn.c_proj", C, C}, {"c_fc", C, 4 * C}, {"mlp.c_proj", 4 * C, C}, {"lm_head", C, V}};
    for (const auto& l : linears) {
        const std::string n = model + " " + l.name;
        out.push_back({n + " forward", BT, l.out, l.in, false});
        out.push_back({n + " dinp", BT, l.in, l.out, false});
        out.push_back({n + " dW", l.out, l.in, BT, true});
    }
    return out;
}

std::vector<Product> all_products() {
    std::vector<Product> p = model_products("baby GPT", 64 * 256, 384, 65);  // B 64, T 256
    for (const Product& q : model_products("GPT-2 small", 8 * 1024, 768, 50257)) p.push_back(q);  // B 8, T 1024
    return p;
}

double most_work(const MatmulSplit& s) {
    double m = 0;
    for (int p = 0; p < s.parts(); p++) m = std::max(m, s.work(p));
    return m;
}

// The stated model of a split product's time on many cores (docs/performance.md, "Many
// cores"): each core multiplies at kCoreFlops, and every number a thread streams comes from
// memory whose bandwidth kBandwidth all the threads share; a product takes the longer of its
// largest part's multiply-adds and all the threads' streamed numbers. Parallel efficiency is
// the one-thread time over t times the t-thread time. A model, not a measurement.
constexpr double kCoreFlops = 64e9;   // float FLOP/s of one core in a library's sgemm
constexpr double kBandwidth = 100e9;  // bytes/s of memory, shared by all the cores
double model_seconds(const Product& q, int threads) {
    const MatmulSplit s = plan_matmul_split(q.M, q.N, q.K, threads);
    return std::max(2 * most_work(s) / kCoreFlops, threads * 4 * s.streamed_per_thread() / kBandwidth);
}
double model_efficiency(const Product& q, int threads) {
    return model_seconds(q, 1) / (threads * model_seconds(q, threads));
}

}  // namespace

TEST_CASE("matmul split: every term of every entry of c in exactly one part, no part thinner than the minimum",
          "[matmul][split]") {
    Rng rng(3);
    int cut_k = 0;
    for (int trial = 0; trial < 300; trial++) {
        const int M = 1 + int(rng.below(700)), N = 1 + int(rng.below(700));
        const int K = 1 + int(rng.below(trial % 2 ? 50 : 20000));
        const int threads = 1 + int(rng.below(130));
        const MatmulSplit s = plan_matmul_split(M, N, K, threads);
        INFO("M " << M << " N " << N << " K " << K << " threads " << threads << " plan " << s.row_parts << " x "
                  << s.col_parts << " x " << s.k_parts);
        REQUIRE(s.parts() >= 1);
        REQUIRE(s.parts() <= threads);
        REQUIRE(s.scratch() <= kSplitScratch);
        cut_k += s.k_parts > 1;
        std::vector<int> covered(size_t(M) * N, 0);
        for (int p = 0; p < s.parts(); p++) {
            const Range r = s.rows(p), c = s.cols(p), t = s.terms(p);
            CHECK((r.size() >= kMinSplit || r.size() == M));
            CHECK((c.size() >= kMinSplit || c.size() == N));
            CHECK((t.size() >= kMinTerms || t.size() == K));
            // a block's runs of terms are consecutive parts, in order, from 0 to K
            CHECK(t.begin == (s.k_part(p) == 0 ? 0 : s.terms(p - 1).end));
            if (s.k_part(p) == s.k_parts - 1) CHECK(t.end == K);
            if (s.k_part(p) > 0) CHECK((s.rows(p - 1).begin == r.begin && s.cols(p - 1).begin == c.begin));
            if (s.k_part(p) > 0) continue;
            for (int i = r.begin; i < r.end; i++)
                for (int j = c.begin; j < c.end; j++) covered[size_t(i) * N + j]++;
        }
        CHECK(std::all_of(covered.begin(), covered.end(), [](int n) { return n == 1; }));
    }
    CHECK(cut_k > 10);  // the trials reach plans that cut K
}

TEST_CASE("matmul split: K is cut only where the grid alone leaves threads idle or streams a third more",
          "[matmul][split]") {
    Rng rng(4);
    for (int trial = 0; trial < 2000; trial++) {
        const int M = 1 + int(rng.below(3000)), N = 1 + int(rng.below(3000)), K = 1 + int(rng.below(40000));
        const int threads = 1 + int(rng.below(130));
        const MatmulSplit s = plan_matmul_split(M, N, K, threads), grid = plan_matmul_grid(M, N, K, threads);
        INFO("M " << M << " N " << N << " K " << K << " threads " << threads);
        CHECK(grid.k_parts == 1);
        CHECK(s.parts() >= grid.parts());
        if (s.k_parts > 1) {
            CHECK((s.parts() > grid.parts() || s.streamed_per_thread() <= 0.75 * grid.streamed_per_thread()));
        } else {
            CHECK((s.row_parts == grid.row_parts && s.col_parts == grid.col_parts));
        }
    }
}

TEST_CASE("matmul split: at 2, 16, 64 and 128 threads the work is even and the numbers a thread streams fall",
          "[matmul][split]") {
    for (const Product& q : all_products()) {
        double streamed_before = 0;
        for (int threads : {2, 16, 64, 128}) {
            const MatmulSplit s = plan_matmul_split(q.M, q.N, q.K, threads);
            INFO(q.name << " (" << q.M << ", " << q.N << ", K " << q.K << ") on " << threads << " threads: plan "
                        << s.row_parts << " x " << s.col_parts << " x " << s.k_parts);
            // every thread has a part, and no part more than 1.1 times the mean work
            CHECK(s.parts() == threads);
            CHECK(most_work(s) <= 1.1 * double(q.M) * q.N * q.K / threads);
            // A strip of rows (or columns) per thread streams all of the other operand; the plan
            // never streams more than that, and its numbers per thread fall as threads grow.
            const double strip =
                q.M >= q.N ? q.K * (double(q.M) / s.parts() + q.N) : q.K * (q.M + double(q.N) / s.parts());
            CHECK(s.streamed_per_thread() <= strip + double(q.M) * q.N / s.parts() + 2.0 * (q.K + q.M + q.N));
            if (streamed_before > 0) CHECK(s.streamed_per_thread() < streamed_before);
            streamed_before = s.streamed_per_thread();
            // the weight gradients at 16 threads and more, where their partial sums fit the bound:
            // K cut, streaming less than the grid alone
            if (q.weight_gradient && threads >= 16 && size_t(q.M) * q.N <= kSplitScratch) {
                CHECK(s.k_parts > 1);
                CHECK(s.streamed_per_thread() < plan_matmul_grid(q.M, q.N, q.K, threads).streamed_per_thread());
            }
        }
    }
}

TEST_CASE("matmul split: by the stated model, the baby GPT's products at 16 threads are at least 80 % efficient",
          "[matmul][split]") {
    for (const Product& q : model_products("baby GPT", 64 * 256, 384, 65)) {
        INFO(q.name << ": " << model_efficiency(q, 16));
        CHECK(model_efficiency(q, 16) >= 0.8);
    }
    // the check can fail: a product split into half the threads' parts is at most 50 % efficient
    const Product q{"half", 1536, 384, 16384, true};
    CHECK(model_seconds(q, 1) / (16 * model_seconds(q, 8)) <= 0.5);
}

// The table in docs/performance.md: build/tests "[split_table]".
TEST_CASE("matmul split: the table of plans, work and numbers streamed per thread", "[.][split_table]") {
    std::printf("%-34s %7s %7s %6s %4s %12s %11s %11s %11s %11s\n", "product", "M", "N", "K", "t", "plan",
                "work/mean", "MB/thread", "grid MB", "model eff");
    for (const Product& q : all_products())
        for (int threads : {2, 16, 64, 128}) {
            const MatmulSplit s = plan_matmul_split(q.M, q.N, q.K, threads);
            const double mean = double(q.M) * q.N * q.K / threads;
            std::printf("%-34s %7d %7d %6d %4d %4dx%dx%-4d %11.3f %11.1f %11.1f %11.2f\n", q.name.c_str(), q.M, q.N,
                        q.K, threads, s.row_parts, s.col_parts, s.k_parts, most_work(s) / mean,
                        4 * s.streamed_per_thread() / 1e6,
                        4 * plan_matmul_grid(q.M, q.N, q.K, threads).streamed_per_thread() / 1e6,
                        model_efficiency(q, threads));
        }
}

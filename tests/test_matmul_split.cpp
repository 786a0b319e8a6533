// The grid a product is cut into over threads (lib/kernels/matmul_split.h), checked on the plan
// itself for thread counts this machine does not have: every entry of c in exactly one block,
// the work even across the threads, and the numbers each thread streams falling as the threads
// grow. The products split for real, on odd sizes and several thread counts, are checked in
// test_matmul_backends.cpp.
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

}  // namespace

TEST_CASE("matmul split: every entry of c in exactly one block, no block thinner than the minimum",
          "[matmul][split]") {
    Rng rng(3);
    for (int trial = 0; trial < 300; trial++) {
        const int M = 1 + int(rng.below(700)), N = 1 + int(rng.below(700)), K = 1 + int(rng.below(50));
        const int threads = 1 + int(rng.below(130));
        const MatmulSplit s = plan_matmul_split(M, N, K, threads);
        INFO("M " << M << " N " << N << " threads " << threads << " grid " << s.row_parts << " x " << s.col_parts);
        REQUIRE(s.parts() >= 1);
        REQUIRE(s.parts() <= threads);
        std::vector<int> covered(size_t(M) * N, 0);
        for (int p = 0; p < s.parts(); p++) {
            const Range r = s.rows(p), c = s.cols(p);
            CHECK((r.size() >= kMinSplit || r.size() == M));
            CHECK((c.size() >= kMinSplit || c.size() == N));
            for (int i = r.begin; i < r.end; i++)
                for (int j = c.begin; j < c.end; j++) covered[size_t(i) * N + j]++;
        }
        CHECK(std::all_of(covered.begin(), covered.end(), [](int n) { return n == 1; }));
    }
}

TEST_CASE("matmul split: at 2, 16, 64 and 128 threads the work is even and the numbers a thread streams fall",
          "[matmul][split]") {
    for (const Product& q : all_products()) {
        double streamed_before = 0;
        for (int threads : {2, 16, 64, 128}) {
            const MatmulSplit s = plan_matmul_split(q.M, q.N, q.K, threads);
            INFO(q.name << " (" << q.M << ", " << q.N << ", K " << q.K << ") on " << threads << " threads: grid "
                        << s.row_parts << " x " << s.col_parts);
            const double mean = double(q.M) * q.N * q.K / threads;
            if (s.parts() == threads) {
                CHECK(most_work(s) <= 1.1 * mean);
            } else {
                // Fewer blocks than threads only where c itself has fewer blocks of the minimum
                // size (the baby GPT's lm_head weight gradient, 65 x 384): a split of K is what
                // would use the rest.
                CHECK(q.M / kMinSplit * (q.N / kMinSplit) < threads);
            }
            // A strip of rows (or columns) per thread streams all of the other operand; the grid
            // never streams more than that, and its numbers per thread fall as threads grow.
            const double strip =
                q.M >= q.N ? q.K * (double(q.M) / s.parts() + q.N) : q.K * (q.M + double(q.N) / s.parts());
            CHECK(s.streamed_most() <= strip + double(q.M) * q.N / s.parts() + 2.0 * (q.K + q.M + q.N));
            if (streamed_before > 0) CHECK(s.streamed_most() < streamed_before);
            streamed_before = s.streamed_most();
        }
    }
}

// The table in docs/performance.md: build/tests "[split_table]".
TEST_CASE("matmul split: the table of grids, work and numbers streamed per thread", "[.][split_table]") {
    std::printf("%-34s %7s %7s %6s %4s %9s %11s %13s\n", "product", "M", "N", "K", "t", "grid", "work/mean",
                "MB/thread");
    for (const Product& q : all_products())
        for (int threads : {16, 64, 128}) {
            const MatmulSplit s = plan_matmul_split(q.M, q.N, q.K, threads);
            const double mean = double(q.M) * q.N * q.K / threads;
            std::printf("%-34s %7d %7d %6d %4d %4dx%-4d %11.3f %13.1f\n", q.name.c_str(), q.M, q.N, q.K, threads,
                        s.row_parts, s.col_parts, most_work(s) / mean, 4 * s.streamed_most() / 1e6);
        }
}

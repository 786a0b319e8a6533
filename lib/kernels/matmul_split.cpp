// matmul_split.cpp — the parts a product is cut into over threads (see matmul_split.h).
#include "lib/kernels/matmul_split.h"

#include <algorithm>

namespace hg {

double MatmulSplit::streamed_per_thread() const {
    const double r = (M + row_parts - 1) / row_parts, n = (N + col_parts - 1) / col_parts;
    const double part = double((K + k_parts - 1) / k_parts) * (r + n) + r * n;
    return part + (k_parts > 1 ? double(k_parts + 1) * M * N / parts() : 0);
}

double MatmulSplit::work(int p) const { return double(rows(p).size()) * cols(p).size() * terms(p).size(); }

namespace {

// Of the plans with `k_parts` = pk for some pk in [k_lo, k_hi]: those that use the most threads,
// and of those the one whose threads stream the least (of equals, the fewest K parts, then the
// most row parts).
MatmulSplit best_of(int M, int N, int K, int threads, int k_lo, int k_hi) {
    const int max_rows = std::max(1, M / kMinSplit), max_cols = std::max(1, N / kMinSplit);
    int parts = 0;
    for (int pk = k_lo; pk <= k_hi; pk++)
        for (int pr = 1; pr <= std::min(threads / pk, max_rows); pr++)
            parts = std::max(parts, pr * pk * std::min(threads / (pr * pk), max_cols));
    MatmulSplit best{M, N, K};
    double least = -1;
    for (int pk = k_lo; pk <= k_hi; pk++)
        for (int pr = 1; pr <= std::min(parts / pk, max_rows); pr++) {
            if (parts % (pr * pk) || parts / (pr * pk) > max_cols) continue;
            const MatmulSplit s{M, N, K, pr, parts / (pr * pk), pk};
            const double cost = s.streamed_per_thread();
            if (least < 0 || cost < least || (cost == least && pk == best.k_parts)) least = cost, best = s;
        }
    return best;
}

}  // namespace

MatmulSplit plan_matmul_grid(int M, int N, int K, int threads) { return best_of(M, N, K, threads, 1, 1); }

MatmulSplit plan_matmul_split(int M, int N, int K, int threads) {
    const MatmulSplit grid = plan_matmul_grid(M, N, K, threads);
    const size_t area = std::max<size_t>(1, size_t(M) * size_t(N));
    const int max_k = int(std::min<size_t>({size_t(K / kMinTerms), size_t(std::max(threads, 1)),
                                            1 + kSplitScratch / area}));
    if (max_k < 2) return grid;
    const MatmulSplit split_k = best_of(M, N, K, threads, 2, max_k);
    if (split_k.parts() > grid.parts()) return split_k;
    return split_k.parts() == grid.parts() && split_k.streamed_per_thread() <= 0.75 * grid.streamed_per_thread()
               ? split_k
               : grid;
}

}  // namespace hg

// matmul_split.cpp — the grid a product is cut into over threads (see matmul_split.h).
#include "lib/kernels/matmul_split.h"

#include <algorithm>

namespace hg {

double MatmulSplit::streamed(int p) const {
    const double r = rows(p).size(), n = cols(p).size();
    return double(K) * (r + n) + r * n;
}

double MatmulSplit::streamed_most() const {
    const double r = (M + row_parts - 1) / row_parts, n = (N + col_parts - 1) / col_parts;
    return double(K) * (r + n) + r * n;
}

double MatmulSplit::work(int p) const { return double(rows(p).size()) * cols(p).size() * K; }

MatmulSplit plan_matmul_split(int M, int N, int K, int threads) {
    MatmulSplit best{M, N, K, 1, 1};
    const int max_rows = std::max(1, M / kMinSplit), max_cols = std::max(1, N / kMinSplit);
    // The most threads the product has blocks for, then the grid of that many that streams least.
    int parts = 1;
    for (int pr = 1; pr <= std::min(threads, max_rows); pr++)
        parts = std::max(parts, pr * std::min(threads / pr, max_cols));
    double least = -1;
    for (int pr = 1; pr <= std::min(parts, max_rows); pr++) {
        if (parts % pr || parts / pr > max_cols) continue;
        const MatmulSplit s{M, N, K, pr, parts / pr};
        const double most = s.streamed_most();
        if (least < 0 || most <= least) least = most, best = s;  // of equals, the most row parts
    }
    return best;
}

}  // namespace hg

// matmul_split.h — how a product c (M,N) = op(a)·op(b), K terms each, is cut over threads.
//
// The output is cut into a grid of row_parts × col_parts blocks, one per thread, rows and
// columns each cut as evenly as whole numbers allow (parts differ by at most one row or
// column). A block of r rows and n columns reads r rows of op(a) and n columns of op(b), K
// numbers each, and writes r·n numbers of c: K·(r + n) + r·n numbers a thread streams. Cutting
// only the rows (strips) keeps n = N, so every thread reads the whole of op(b); a grid makes both
// r and n shrink as the threads grow, and the numbers a thread streams fall with them.
//
// The grid is the one, among those that use as many threads as the product has blocks of at
// least kMinSplit rows and columns for, that streams the fewest numbers per thread. A product
// that is small along both sides is left whole (one part), and it is the caller's one thread
// that runs it. The plan depends only on (M, N, K, threads): a thread setting gives the same
// blocks, so the same bits, every time.
#pragma once
#include <cstddef>

namespace hg {

constexpr int kMinSplit = 16;  // rows or columns: no block is cut thinner than this

struct Range {
    int begin = 0, end = 0;
    int size() const { return end - begin; }
};

struct MatmulSplit {
    int M = 0, N = 0, K = 0;
    int row_parts = 1, col_parts = 1;
    int parts() const { return row_parts * col_parts; }
    // Block p (0 ≤ p < parts()): its rows and columns of c.
    Range rows(int p) const { return cut(M, row_parts, p / col_parts); }
    Range cols(int p) const { return cut(N, col_parts, p % col_parts); }
    // The numbers block p reads from the two operands and writes to c: K·(rows + cols) + rows·cols.
    double streamed(int p) const;
    // The most any block streams: a block of the largest parts, ⌈M/row_parts⌉ × ⌈N/col_parts⌉.
    double streamed_most() const;
    // Its multiply-adds: rows · cols · K.
    double work(int p) const;

private:
    static Range cut(int len, int parts, int i) {
        return {int((long long)len * i / parts), int((long long)len * (i + 1) / parts)};
    }
};

MatmulSplit plan_matmul_split(int M, int N, int K, int threads);

}  // namespace hg

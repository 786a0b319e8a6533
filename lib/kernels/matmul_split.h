// matmul_split.h — how a product c (M,N) = op(a)·op(b), K terms each, is cut over threads.
//
// The output is cut into a grid of row_parts × col_parts blocks, rows and columns each cut as
// evenly as whole numbers allow (parts differ by at most one row or column), and the K terms
// of each entry into k_parts runs of terms: one part per thread, row_parts · col_parts · k_parts
// in all. A part of r rows, n columns and t terms reads r rows of op(a) and n columns of op(b),
// t numbers each, and writes r·n numbers: t·(r + n) + r·n numbers a thread streams. Cutting only
// the rows (strips) keeps n = N, so every thread reads the whole of op(b); a grid makes both r
// and n shrink as the threads grow, and the numbers a thread streams fall with them.
//
// Cutting K is for the weight gradients: a small output (a few hundred rows and columns) summed
// over B·T terms. The grid alone would give each thread a thin block with every one of the
// terms; cutting K gives it a bigger block with fewer terms, so it streams fewer numbers, and
// a small output has parts for every thread. The first run of terms is added into c as an
// unsplit product would be (c = alpha·a₀b₀ + beta·c); each later one is written to a partial
// sum of its own, (k_parts − 1)·M·N numbers of scratch in all, at most kSplitScratch; then
// the threads add the partial sums into c, each entry in the order of its runs of terms. That
// sum is extra work, (k_parts + 1)·M·N numbers streamed, shared by the threads, so K is cut
// only where it streams at most three quarters of what the grid alone would, or where the grid
// alone would leave threads idle.
//
// The plan is, of those that use the most threads with blocks of at least kMinSplit rows and
// columns and runs of at least kMinTerms terms, the one that streams the fewest numbers per
// thread (with the rule above for cutting K). A product that is small along every side is left
// whole (one part), and it is the caller's one thread that runs it. The plan depends only on
// (M, N, K, threads): a thread setting gives the same parts, so the same bits, every time.
#pragma once
#include <cstddef>

namespace hg {

constexpr int kMinSplit = 16;                    // rows or columns: no block is cut thinner than this
constexpr int kMinTerms = 1024;                  // terms: no run of K is cut shorter than this
constexpr size_t kSplitScratch = size_t(16) << 20;  // numbers (64 MiB of float): the partial sums' bound

struct Range {
    int begin = 0, end = 0;
    int size() const { return end - begin; }
};

struct MatmulSplit {
    int M = 0, N = 0, K = 0;
    int row_parts = 1, col_parts = 1, k_parts = 1;
    int parts() const { return row_parts * col_parts * k_parts; }
    // Part p (0 ≤ p < parts()): its rows and columns of c, and its run of the K terms; the
    // parts of one block of c are k_parts consecutive p, in the order of their terms.
    Range rows(int p) const { return cut(M, row_parts, p / k_parts / col_parts); }
    Range cols(int p) const { return cut(N, col_parts, p / k_parts % col_parts); }
    Range terms(int p) const { return cut(K, k_parts, p % k_parts); }
    int k_part(int p) const { return p % k_parts; }  // 0: added into c; i > 0: partial sum i − 1
    // The most numbers a thread streams, what the plan minimises: the largest part's,
    // terms · (rows + cols) + rows·cols with ⌈M/row_parts⌉ rows, ⌈N/col_parts⌉ columns and
    // ⌈K/k_parts⌉ terms, plus its share of adding the partial sums into c, (k_parts + 1)·M·N /
    // parts() when K is cut.
    double streamed_per_thread() const;
    // The numbers of scratch the partial sums take: (k_parts − 1)·M·N.
    size_t scratch() const { return size_t(k_parts - 1) * size_t(M) * size_t(N); }
    // Its multiply-adds: rows · cols · terms.
    double work(int p) const;

private:
    static Range cut(int len, int parts, int i) {
        return {int((long long)len * i / parts), int((long long)len * (i + 1) / parts)};
    }
};

MatmulSplit plan_matmul_split(int M, int N, int K, int threads);
// The best grid with K left whole (k_parts = 1): what the plan above compares a cut of K with.
MatmulSplit plan_matmul_grid(int M, int N, int K, int threads);

}  // namespace hg

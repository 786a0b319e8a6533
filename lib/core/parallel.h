// parallel.h — how the layers split a loop across OpenMP threads: one rule, one helper.
//
// The rule: a loop goes parallel when it has more than one piece of work and touches more than
// kParallelMin numbers (or the threshold its caller measured, when its numbers are cheaper or
// dearer than an elementwise add or GELU's); below that, waking the threads costs more than
// they save. The work
// is cut into pieces of a size fixed by the caller, never by the thread count, and each piece
// is computed whole by one thread, in the order a serial loop would. So what such a loop
// computes is the same bits whatever the number of threads, and whether it ran in parallel.
// (The sgemm calls are another matter: OpenBLAS's own threading can change the last bits of a
// product with the thread count, which is why results are bit-identical for a given thread
// setting, not across settings.)
//
// Called from inside another parallel region (the trainer's batch threads), the loop runs on
// the calling thread alone: nested regions are inactive, OpenMP's default. Attention and
// linear_forward open their own regions instead: each hands its threads whole sgemm calls,
// which OpenBLAS then runs single-threaded, one (batch, head) or one block of rows per thread.
#pragma once
#include <algorithm>
#include <cstddef>

namespace hg {

constexpr size_t kParallelMin = 32768;  // numbers

// Calls f(i0, len) for each piece [i0, i0 + len) of [0, n): pieces of `piece` items, the last
// one shorter when piece does not divide n. Each item is `numbers_per_item` numbers of work
// (1 for an elementwise loop, C for a loop over rows of C), which is what the rule counts.
template <typename F>
void for_pieces(size_t n, size_t piece, size_t numbers_per_item, F&& f, size_t parallel_min = kParallelMin) {
    const std::ptrdiff_t pieces = std::ptrdiff_t((n + piece - 1) / piece);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (pieces > 1 && n * numbers_per_item > parallel_min)
#endif
    for (std::ptrdiff_t k = 0; k < pieces; k++) {
        const size_t i0 = size_t(k) * piece;
        f(i0, std::min(piece, n - i0));
    }
}

}  // namespace hg

// parallel.h — how the layers split a loop across OpenMP threads (one rule, one helper), and how
// an exception thrown inside an OpenMP region gets out of it.
//
// The rule: a loop goes parallel when it has more than one piece of work and touches more than
// kParallelMin numbers (or the threshold its caller measured, when its numbers are cheaper or
// dearer than an elementwise add or GELU's); below that, waking the threads costs more than
// they save. The work is cut into pieces of a size fixed by the caller, never by the thread
// count, and each piece is computed whole by one thread, in the order a serial loop would. So
// what such a loop computes is the same bits whatever the number of threads, and whether it ran
// in parallel.
// (The products are another matter: a backend that splits one product over the threads
// (lib/kernels/matmul.h) may sum in another order with another thread count, which is why
// results are bit-identical for a given thread setting, not across settings.)
//
// Called from inside another parallel region (the trainer's batch threads), the loop runs on
// the calling thread alone: nested regions are inactive, OpenMP's default. Attention and
// linear_forward open their own regions instead: each hands its threads whole products, which
// the backend then runs single-threaded, one (batch, head) or one block of rows per thread.
//
// An exception must not leave an OpenMP region (the program would end): work inside one runs
// through ParallelExceptions, which keeps what was thrown and throws it after the region.
#pragma once
#include <algorithm>
#include <cstddef>
#include <exception>

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

// Exceptions thrown inside an OpenMP region, thrown again after it:
//
//   ParallelExceptions errors;
//   #pragma omp parallel for
//   for (int i = 0; i < n; i++) errors.run(i, [&] { work(i); });
//   errors.rethrow();
//
// Of several, the one of the lowest-numbered piece of work is kept, not the first in time, so
// which error a run reports does not depend on how its threads were scheduled.
class ParallelExceptions {
public:
    template <typename F>
    void run(long piece, F&& f) noexcept {
        try {
            f();
        } catch (...) {
            keep(piece, std::current_exception());
        }
    }
    bool any() const { return piece_ >= 0; }
    long piece() const { return piece_; }  // the piece whose exception is kept; -1: none
    void rethrow() const {
        if (error_) std::rethrow_exception(error_);
    }

private:
    std::exception_ptr error_;
    long piece_ = -1;
    void keep(long piece, std::exception_ptr e) noexcept {
#ifdef _OPENMP
#pragma omp critical(hg_parallel_exceptions)
#endif
        if (piece_ < 0 || piece < piece_) piece_ = piece, error_ = std::move(e);
    }
};

}  // namespace hg

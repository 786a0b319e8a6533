// tensor.h — plain tensors: a pointer, a shape, row-major; and the arena they point into.
//
// A Tensor owns nothing: it is a view (data pointer + shape) into an Arena, one aligned
// allocation made before training starts. Parameters, gradients, optimizer moments and
// activations each live in one arena, so a training step allocates nothing.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <new>
#include <string>
#include <utility>

#include "lib/core/errors.h"
#include "lib/core/parallel.h"

namespace hg {

constexpr int kMaxDims = 4;

// A shape of up to four dimensions, stored inline (making one never allocates).
struct Shape {
    std::array<size_t, kMaxDims> dims{};  // unused trailing entries are 0
    int ndim = 0;

    Shape() = default;
    Shape(std::initializer_list<size_t> d) {
        for (size_t x : d) dims[ndim++] = x;
    }
    size_t operator[](int i) const { return dims[i]; }
    size_t numel() const {
        size_t n = 1;
        for (int i = 0; i < ndim; i++) n *= dims[i];
        return n;
    }
    bool operator==(const Shape& o) const { return ndim == o.ndim && dims == o.dims; }
    bool operator!=(const Shape& o) const { return !(*this == o); }
    std::string str() const {  // "(65, 128)"
        std::string s = "(";
        for (int i = 0; i < ndim; i++) s += (i ? ", " : "") + std::to_string(dims[i]);
        return s + ")";
    }
};

// A row-major view: data[i0*s0 + i1*s1 + ...] with strides from the shape.
template <typename real>
struct Tensor {
    real* data = nullptr;
    Shape shape;
    size_t numel() const { return shape.numel(); }
};

// Asks the kernel to map [p, p + bytes) in huge pages where it can (2 MiB on x86-64 and most
// ARM64 kernels, instead of 4 KiB): a first touch then faults once per huge page, not 512
// times, and the TLB covers the arena with fewer entries. Only advice: a kernel without
// transparent huge pages, or with them off, maps small pages as before. Blocks under 4 MiB are
// left alone (glibc serves them from its heap, shared with other allocations).
void ask_for_huge_pages(void* p, size_t bytes);

// One zeroed, 64-byte-aligned allocation of n numbers (64 bytes: an AVX-512 vector, a cache line).
// calloc, not malloc and memset: a large block comes fresh from the kernel, already zero, and
// its pages are mapped when first touched rather than all at once here, so building a model
// costs no pass over memory it may never use (start-up's timing models leave most of theirs
// untouched).
template <typename real>
class Arena {
public:
    Arena() = default;
    explicit Arena(size_t n) { allocate(n); }
    Arena(Arena&& o) noexcept { *this = std::move(o); }
    Arena& operator=(Arena&& o) noexcept {
        data_ = std::move(o.data_);
        aligned_ = std::exchange(o.aligned_, nullptr), size_ = std::exchange(o.size_, 0);
        return *this;
    }
    void allocate(size_t n) {
        size_t bytes = ((n * sizeof(real) + 63) / 64) * 64;
        if (bytes == 0) bytes = 64;
        void* base = std::calloc(1, bytes + 64);  // calloc aligns to 16: 64 more to align within
        if (!base) fail("out of memory allocating {} MiB", bytes >> 20);
        data_.reset(static_cast<real*>(base));
        aligned_ = reinterpret_cast<real*>((reinterpret_cast<uintptr_t>(base) + 63) / 64 * 64);
        size_ = n;
        ask_for_huge_pages(base, bytes + 64);
    }
    // Every number to zero, in pieces over the threads (parallel.h): over a large arena (a model's
    // gradient, 0.5 GB at GPT-2 small) a pass at memory's pace takes more than one core.
    void zero() {
        real* p = aligned_;
        for_pieces(size_, size_t(1) << 16, 1, [p](size_t i0, size_t n) { std::memset(p + i0, 0, n * sizeof(real)); });
    }
    real* data() const { return aligned_; }
    size_t size() const { return size_; }

private:
    struct Free {
        void operator()(real* p) const { std::free(p); }
    };
    std::unique_ptr<real, Free> data_;  // what calloc returned
    real* aligned_ = nullptr;           // the first 64-byte boundary in it
    size_t size_ = 0;
};

// Hands out consecutive 64-byte-aligned pieces of an arena; with base == nullptr it only
// counts, which is how the arena's size is found before allocating it.
template <typename real>
struct Carver {
    real* base;
    size_t used = 0;
    real* take(size_t n) {
        real* p = base ? base + used : nullptr;
        used += (n + 15) / 16 * 16;
        return p;
    }
};

}  // namespace hg

// token_view.cpp — see token_view.h.
#include "lib/data/token_view.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>

namespace hg {

static const size_t kPageBytes = size_t(sysconf(_SC_PAGESIZE));

TokenView TokenView::arrays(std::vector<Part> parts) {
    TokenView v;
    v.starts_.push_back(0);
    for (const Part& p : parts) v.starts_.push_back(v.starts_.back() + p.n);
    v.size_ = v.starts_.back();
    v.parts_ = std::move(parts);
    return v;
}

TokenView TokenView::mapped(std::vector<Part> parts) {
    TokenView v = arrays(std::move(parts));
    v.read_since_release_ = std::make_shared<std::atomic<size_t>>(0);
    return v;
}

void TokenView::copy(size_t start, size_t n, int* out) const {
    assert(start + n <= size_);
    if (ints_) {
        std::copy(ints_ + start, ints_ + start + n, out);
        return;
    }
    // The part holding `start`: the last whose beginning is <= start.
    size_t k = size_t(std::upper_bound(starts_.begin(), starts_.end(), start) - starts_.begin()) - 1;
    size_t done = 0;
    while (done < n) {
        const size_t off = start + done - starts_[k];
        const size_t take = std::min(n - done, parts_[k].n - off);
        const uint16_t* src = parts_[k].tokens + off;
        for (size_t i = 0; i < take; i++) out[done + i] = src[i];
        done += take;
        k++;
    }
    // The pages it may have mapped: the bytes read in whole pages, and fault-around at each end.
    const size_t touched = (2 * n / kPageBytes + 1) * kPageBytes + 2 * kFaultAroundBytes;
    if (read_since_release_ && read_since_release_->fetch_add(touched) + touched >= kReleaseBytes) release_pages();
}

int TokenView::at(size_t i) const {
    int id;
    copy(i, 1, &id);
    return id;
}

void TokenView::release_pages() const {
    read_since_release_->store(0);
    const uintptr_t page = uintptr_t(kPageBytes);
    for (const Part& p : parts_) {
        // The whole pages the part lies on (the first may hold a shard's header: same mapping).
        const uintptr_t begin = uintptr_t(p.tokens) & ~(page - 1);
        const uintptr_t end = uintptr_t(p.tokens + p.n);
        madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
    }
}

}  // namespace hg

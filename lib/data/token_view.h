// token_view.h — a split's tokens as the trainer and the evaluation read them, wherever they
// live: a std::vector<int> in memory (a text tokenized at start-up), or uint16 token arrays
// mapped from files (llm.c's shards, nanoGPT's train.bin / val.bin; lib/data/shards.h). Nothing
// is copied: a view points at the ids.
//
// A view over several arrays reads them as one sequence, their concatenation in order, so
// window i of a split is the same T + 1 tokens whether the split is one array or many, and a
// window may run from the end of one shard into the next (consecutive shards are consecutive
// pieces of one token stream, so such a window is a window of that stream).
//
// Resident memory. Reading a mapped array faults its pages into this process (the kernel's page
// cache holds them anyway; they count in the RSS as file pages). A mapped view counts the pages
// its reads may have mapped (a read fault maps the pages around it that are in the page cache
// too, Linux's fault-around, 64 kB: a window of T + 1 tokens counts as its bytes rounded up to
// pages plus twice kFaultAroundBytes) and, once they add up
// to kReleaseBytes, hands every page of its arrays back to the kernel (madvise MADV_DONTNEED: they
// stay in the page cache, and the next read faults them in again, a minor fault). A run's
// resident share of its data therefore stays under kReleaseBytes plus one read's pages, however
// large the data.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace hg {

class TokenView {
public:
    // Bytes of pages touched between two hand-backs (see above).
    static constexpr size_t kReleaseBytes = size_t(8) << 20;
    static constexpr size_t kFaultAroundBytes = size_t(64) << 10;

    TokenView() = default;
    // The ids of a vector (which must outlive the view and not change). Implicit: a vector is
    // read as before wherever a view is asked for.
    TokenView(const std::vector<int>& ids) : ints_(ids.data()), size_(ids.size()) {}  // NOLINT
    TokenView(const int* ids, size_t n) : ints_(ids), size_(n) {}                     // ids (n)

    // One uint16 array of the concatenation: its tokens and n (they must outlive the view).
    struct Part {
        const uint16_t* tokens;  // (n)
        size_t n;
    };
    // Arrays in read-only file mappings (MappedFile, shards.h): their pages are handed back as
    // above. Only for such mappings: handed back, other memory would read as zeros.
    static TokenView mapped(std::vector<Part> parts);
    // Arrays anywhere (in memory): read the same way, nothing handed back.
    static TokenView arrays(std::vector<Part> parts);

    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    // out[0..n) = ids[start .. start+n) of the concatenation; start + n <= size() (asserted).
    // Allocates nothing.
    void copy(size_t start, size_t n, int* out) const;  // out (n)
    int at(size_t i) const;
    // The same tokens in the same place (the same vector, or the same mapped arrays).
    bool same_as(const TokenView& o) const {
        return ints_ == o.ints_ && size_ == o.size_ && (parts_.empty() ? o.parts_.empty()
                                                        : !o.parts_.empty() && parts_[0].tokens == o.parts_[0].tokens);
    }

private:
    const int* ints_ = nullptr;  // (size_) in-memory ids, or null for a mapped view
    size_t size_ = 0;
    std::vector<Part> parts_;     // a mapped view's arrays, in order
    std::vector<size_t> starts_;  // (parts + 1) where each part begins in the concatenation
    // Bytes of pages touched since the pages were last handed back, shared by copies of the
    // view; null: nothing is handed back (arrays()).
    std::shared_ptr<std::atomic<size_t>> read_since_release_;

    void release_pages() const;
};

}  // namespace hg

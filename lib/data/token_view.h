// token_view.h — a split's tokens as the trainer and the evaluation read them, wherever they
// live: a std::vector<int> in memory (a text tokenized at start-up), uint16 arrays in memory, or
// uint16 tokens in files (llm.c's shards, nanoGPT's train.bin / val.bin; lib/data/shards.h).
// Nothing is loaded: a view points at the ids, or at where in a file they are.
//
// A view over several parts reads them as one sequence, their concatenation in order, so
// window i of a split is the same T + 1 tokens whether the split is one part or many, and a
// window may run from the end of one shard into the next (consecutive shards are consecutive
// pieces of one token stream, so such a window is a window of that stream).
//
// Files are read window by window (pread, into the caller's buffer), not mapped. A file cut
// short under a run (a truncate, a copy over it) is then a read that comes back short: one
// hg::Error naming the file and both sizes, never a signal (a mapped file's vanished page is
// SIGBUS). A file replaced by another of its name (a rename, a new build/prepare after a
// delete) is no change: the view keeps the file it opened; bytes overwritten in place, the
// length kept, are read as they are now. Read this way, the data costs no resident memory of
// its own: the kernel's page cache holds the pages (and may drop them), and the run holds only
// the windows it copied out.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hg {

// A file open for reading, closed when its last owner lets go.
struct ReadFile {
    std::string path;
    int fd = -1;
    uint64_t size = 0;  // bytes, when it was opened
    // hg::Error naming the path when it cannot be opened or is not a regular file.
    static std::shared_ptr<const ReadFile> open(const std::string& path);
    // n bytes from `offset` into dst (n): all of them, or hg::Error saying the file is shorter
    // now than when it was opened (or cannot be read), never a partial read. Thread-safe.
    void read(uint64_t offset, void* dst, size_t n) const;
    ReadFile() = default;
    ReadFile(const ReadFile&) = delete;
    ReadFile& operator=(const ReadFile&) = delete;
    ~ReadFile();
};

class TokenView {
public:
    TokenView() = default;
    // The ids of a vector (which must outlive the view and not change). Implicit: a vector is
    // read as before wherever a view is asked for.
    TokenView(const std::vector<int>& ids) : ints_(ids.data()), size_(ids.size()) {}  // NOLINT
    TokenView(const int* ids, size_t n) : ints_(ids), size_(n) {}                     // ids (n)

    // One part of the concatenation: n little-endian uint16 tokens, in memory at `tokens` (which
    // must outlive the view), or, with tokens null, in `file` from byte `offset` on.
    struct Part {
        const uint16_t* tokens = nullptr;  // (n)
        size_t n = 0;
        std::shared_ptr<const ReadFile> file;
        uint64_t offset = 0;
    };
    static TokenView of_parts(std::vector<Part> parts);

    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    // out[0..n) = ids[start .. start+n) of the concatenation; start + n <= size() (asserted).
    // Allocates nothing. A file part that no longer holds its tokens: hg::Error (see above).
    void copy(size_t start, size_t n, int* out) const;  // out (n)
    int at(size_t i) const;
    // The same tokens in the same place (the same vector, or the same parts).
    bool same_as(const TokenView& o) const;

private:
    const int* ints_ = nullptr;  // (size_) in-memory ids, or null for a view of parts
    size_t size_ = 0;
    std::vector<Part> parts_;     // in order
    std::vector<size_t> starts_;  // (parts + 1) where each part begins in the concatenation
};

}  // namespace hg

// token_writer.h — one split's tokens written, streaming, as llm.c's shards or as nanoGPT's
// .bin (formats: lib/data/shards.h). Files are written as NAME.partial; commit() renames them
// once all are complete, and a writer destroyed without commit() removes them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace hg {

class TokenWriter {
public:
    // format "llm.c": DIR/PREFIX_SPLIT_NNNNNN.bin of shard_tokens each (the tail rule of
    // prepare.h: a last piece shorter than tail_tokens joins the shard before it); "nanogpt":
    // DIR/SPLIT.bin.
    TokenWriter(std::string dir, std::string format, std::string prefix, std::string split, size_t shard_tokens,
                size_t tail_tokens);
    ~TokenWriter();
    TokenWriter(const TokenWriter&) = delete;
    TokenWriter& operator=(const TokenWriter&) = delete;

    void write(const int* ids, size_t n);  // ids (n), each in [0, 65536)
    // Closes the last file (taking in the held-back tail). After it, paths() are final names.
    void finish();
    // Renames every .partial to its name; after finish().
    void commit();
    uint64_t tokens() const { return total_; }
    const std::vector<std::string>& paths() const { return paths_; }

private:
    std::string dir_, format_, prefix_, split_;
    size_t shard_tokens_, tail_tokens_;
    FILE* f_ = nullptr;
    size_t in_file_ = 0;             // tokens in the open file
    uint64_t total_ = 0;
    std::vector<uint16_t> held_;     // tokens past a full shard, not yet enough for a new one
    std::vector<uint16_t> buf_;      // conversion buffer
    std::vector<std::string> paths_; // final names of the files begun
    bool committed_ = false;

    void open_next();
    void append(const uint16_t* t, size_t n);
    void close_file();
};

}  // namespace hg

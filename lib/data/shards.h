// shards.h — token files on disk, in the two formats people already have, read window by
// window where they lie (token_view.h), never loaded.
//
// llm.c's shard (what build/prepare writes): a header of 256 little-endian int32,
//   [0] = 20240520 (the magic), [1] = 1 (the version: uint16 tokens), [2] = n (the tokens),
//   [3..255] = 0,
// then the n tokens as little-endian uint16; the file is exactly 1024 + 2n bytes. Shards are
// named PREFIX_train_NNNNNN.bin and PREFIX_val_NNNNNN.bin (llm.c also writes
// PREFIX_train.bin / PREFIX_val.bin for a single shard; both are read), and a split is its
// shards in the order of their names.
//
// nanoGPT's data directory: train.bin and val.bin, each nothing but uint16 tokens (numpy's
// tofile, little-endian), GPT-2's ids unless the directory says otherwise.
//
// Which tokenizer the ids belong to is not in either format. A directory says it with
// tokenizer.json beside the token files: {"tokenizer": "char", "vocab": [...]} or
// {"tokenizer": "gpt2"}; without one the ids are GPT-2's (as llm.c's and nanoGPT's own GPT-2
// data). A nanoGPT directory with meta.pkl (its char-level vocabulary, a Python pickle) and no
// tokenizer.json is refused: tools/nanogpt_meta.py writes the one from the other.
//
// Everything is checked when opened, before any training: each header field, the file's size
// against the header, every token against the tokenizer's size (one pass over the file, read
// in pieces of 2 MB: the check leaves nothing resident), each split's length. A flaw throws
// hg::Error naming the file and the field; so does a file that changes size later, while a run
// reads it (token_view.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lib/data/token_view.h"

namespace hg {

inline constexpr int32_t kShardMagic = 20240520;
inline constexpr int32_t kShardVersion = 1;
inline constexpr size_t kShardHeaderInts = 256;
inline constexpr size_t kShardHeaderBytes = kShardHeaderInts * 4;

// One file's tokens: the open file and where in it the uint16 tokens lie.
struct TokenFile {
    std::shared_ptr<const ReadFile> file;
    uint64_t offset = 0;  // bytes before the first token
    size_t n = 0;
    TokenView::Part part() const { return {nullptr, n, file, offset}; }
};

// An llm.c shard: the header checked against the file's size (hg::Error naming the file and
// the header int at fault).
TokenFile open_shard(const std::string& path);
// A nanoGPT .bin: raw uint16 tokens (an empty or odd-sized file is refused).
TokenFile open_raw_tokens(const std::string& path);
// The 1024 header bytes of a shard of n tokens.
std::vector<uint8_t> shard_header(size_t n);

// The tokenizer a token directory declares (tokenizer.json), or gpt2 when it declares none.
struct DataTokenizer {
    std::string name = "gpt2";        // "char" | "gpt2"
    std::vector<std::string> vocab;   // the char tokenizer's (empty for gpt2)
    int size() const;                 // V: every id must be below it
    bool operator==(const DataTokenizer& o) const { return name == o.name && vocab == o.vocab; }
    std::string describe() const;     // "char (65 tokens)" | "gpt2"
};
DataTokenizer read_data_tokenizer(const std::string& dir);
// One tokenizer.json file (hg::Error naming it when it is not one).
DataTokenizer read_tokenizer_file(const std::string& path);
// DIR/tokenizer.json for `tok` (written atomically).
void write_data_tokenizer(const std::string& dir, const DataTokenizer& tok);

// A split's or a whole set's token files, open, with the view that reads them.
struct TokenFiles {
    std::vector<TokenFile> files;
    std::vector<std::string> paths;
    TokenView view;   // their concatenation
    size_t tokens() const { return view.size(); }
};

// What --data names when it is not a text file, opened and checked.
struct TokenData {
    std::string format;   // "llm.c shards" | "nanoGPT"
    DataTokenizer tokenizer;
    TokenFiles train, val;
    std::string describe() const;  // "llm.c shards: 3 train files, 1 val file"
};

// True when `path` names token data rather than a text file: a directory, a glob (* ? [), or a
// file ending in .bin.
bool is_token_data_path(const std::string& path);

// Opens the token data `path` names: a directory of llm.c shards, a nanoGPT directory
// (train.bin and val.bin), or a glob of shards (split by _train / _val in their names).
// need_train: the train split must be there too (train; eval needs only the split it scores).
// Every token is checked against the tokenizer's size. hg::Error for every flaw.
TokenData open_token_data(const std::string& path, bool need_train = true);

// Every file holds a window of block_size T: at least T + 1 tokens (hg::Error naming the first
// that does not).
void check_windows(const TokenData& d, int T);

// The data's ids are those of the tokenizer `name` (with `vocab` for char) a model reads:
// hg::Error saying which is which otherwise (`whose`: "the checkpoint's model", "--tokenizer").
void check_same_tokenizer(const TokenData& d, const std::string& name, const std::vector<std::string>& vocab,
                          const std::string& whose);

}  // namespace hg

// prepare.h — text of any size into token files, streaming: what build/prepare runs.
//
// The inputs (files; directories, every regular file under them in path order; "-" for
// standard input) are read as one byte stream, their concatenation, as `cat` would give it.
// The stream is cut into pieces of about chunk_bytes, a batch of pieces is encoded side by side
// (one OpenMP thread a piece), and the tokens are written in stream order into llm.c's shards
// (lib/data/shards.h) or nanoGPT's train.bin / val.bin. Where the pieces are cut depends only on
// the bytes and chunk_bytes, never on the number of threads, so the output is byte-identical
// whatever the thread count.
//
// Cuts that change nothing. With the char tokenizer a piece ends at any character boundary (the
// last one at or before chunk_bytes). GPT-2's pre-tokenizer (lib/text/bpe.h) looks past a
// piece's end only within a run of white space, so a piece ends where no token can straddle the
// cut and nothing looks across it: before a space that follows a visible ASCII character and
// precedes an ASCII letter ("word| next"), or before an ASCII letter that follows a newline that
// follows a visible ASCII character ("word:\n|Next"), the last such place between chunk_bytes and
// 2·chunk_bytes. Encoding the pieces one by one then gives exactly the tokens of encoding the
// text whole (tested). A stretch of 2·chunk_bytes without such a place (no spaces, no lines) is
// cut at a character boundary there, where the tokens may differ from the whole text's.
//
// The split, as build/train --data=FILE makes it (lib/data/dataset.h's split_text): the first
// train_fraction of the characters train, the rest val, no piece straddling the cut. That needs
// the stream's length, so the inputs are read twice (a first pass counts the characters); a
// stream that cannot be read twice (standard input) needs val_chars instead: the first val_chars
// characters are the val split and the rest train (as llm.c's own preparers take their first
// shard for val). The char tokenizer's vocabulary is the distinct characters of the whole input,
// found by the same first pass, or read from a vocabulary file (a tokenizer.json) given
// beforehand; it is written beside the tokens (tokenizer.json) with the first shard.
//
// Memory, whatever the input's size and whatever the thread count: the stream's unread bytes
// (under 3·chunk_bytes) and the read buffer (chunk_bytes), one batch of batch_pieces pieces (at
// most 2·chunk_bytes each) and their tokens as ints (4 bytes each, at most one per byte), the
// writer's uint16 copy of one piece's tokens, and for shards up to kTailTokens tokens held back:
// about (10·batch_pieces + 8)·chunk_bytes + 128 kB, plus the program, the tokenizer and its
// scratch for each piece being encoded (docs/data.md has the measurement). The batch is a fixed
// number of pieces, not a multiple of the thread count, so the bound holds for any thread count;
// threads beyond batch_pieces have nothing to encode, and are not started.
//
// Shards hold shard_tokens tokens each, except the last of each split: a tail shorter than
// kTailTokens goes into the shard before it (which may then hold up to shard_tokens +
// kTailTokens - 1), so no shard but a split's only one is shorter than kTailTokens.
//
// Nothing is left behind by a failed run: the files are written as NAME.partial and renamed
// once every one is complete; an error removes them. An out_dir that already holds token files
// is refused.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lib/data/shards.h"

namespace hg {

inline constexpr size_t kTailTokens = 65536;

struct PrepareOptions {
    std::vector<std::string> inputs;  // files, directories, "-"
    std::string out_dir;
    std::string tokenizer = "gpt2";   // "char" | "gpt2"
    std::string gpt2_dir;             // GPT-2's encoder.json and vocab.bpe (tokenizer gpt2)
    std::string vocab;                // char: a tokenizer.json to take the vocabulary from (no first pass for it)
    double train_fraction = 0.9;      // the first this much of the characters train
    int64_t val_chars = -1;           // >= 0: instead, the first val_chars characters are val
    std::string format = "llm.c";     // "llm.c" (shards) | "nanogpt" (train.bin, val.bin)
    std::string prefix = "data";      // shards are PREFIX_train_NNNNNN.bin, PREFIX_val_NNNNNN.bin
    size_t shard_tokens = 100000000;  // llm.c's 10^8
    size_t chunk_bytes = size_t(1) << 20;
    int batch_pieces = 8;             // pieces encoded side by side, at most one per thread
    int threads = 0;                  // encoding threads; 0: OpenMP's default (never changed: num_threads)
};

struct PrepareProgress {
    uint64_t bytes = 0;        // read so far (this pass)
    uint64_t total_bytes = 0;  // of the inputs; 0 when unknown (standard input)
    uint64_t tokens = 0;       // written so far
    double seconds = 0;        // since this pass began
    bool first_pass = false;   // the counting pass (no tokens)
};

struct PrepareResult {
    uint64_t bytes = 0, characters = 0, train_tokens = 0, val_tokens = 0;
    std::vector<std::string> files;  // the token files written, in order (train, then val)
    DataTokenizer tokenizer;
    double seconds = 0, first_pass_seconds = 0;
};

// The inputs as the list of files they name, in reading order ("-" stays "-"); files under
// `skip_dir` (the output directory) are left out. hg::Error for a path that does not exist or a
// directory with no file.
std::vector<std::string> list_inputs(const std::vector<std::string>& inputs, const std::string& skip_dir);

// Runs the whole preparation; `progress` is called after each batch of pieces.
PrepareResult prepare_data(const PrepareOptions& opt,
                           const std::function<void(const PrepareProgress&)>& progress = nullptr);

}  // namespace hg

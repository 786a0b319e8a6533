// data.h — character-level data: read a text file, turn it into token ids, split it into
// train / val, and cut random training windows (batches) out of a split.
//
// The pipeline is nanoGPT's shakespeare_char prepare.py + get_batch, in C++:
//
//   text  = read_text_file(path)                    // the whole file, as bytes
//   tok   = Tokenizer::from_text(text)              // vocabulary = the distinct characters
//   split = split_text(text, tok)                   // first 90 % of the characters train, the
//                                                   // rest val, each part encoded on its own
//   sample_batch(idx, targets, split.train, B, T, rng)   // B windows of T+1 tokens
//
// Characters, not bytes. A "character" here is one Unicode code point, and the text must be
// valid UTF-8. Each token is one code point, stored as its UTF-8 bytes (1 to 4 of them), so a
// multi-byte character like 'é' (C3 A9) is ONE token and is never split into bytes; decoding
// therefore always yields valid UTF-8. Token ids are ordered by code point, which for ASCII
// text is byte order: tiny Shakespeare gets exactly nanoGPT's sorted(set(text)), 65 tokens
// starting "\n", " ", "!", ... (Python also sorts str characters by code point, so the two
// agree on any UTF-8 text.) No normalisation is done: 'é' as one code point (U+00E9) and as
// 'e' + U+0301 (combining accent) are different token sequences, as in Python.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "lib/core/rng.h"
#include "lib/text/tokenizer.h"

namespace hg {

// The whole file as a string. Throws hg::Error for a missing or unreadable file
// ("cannot read data file 'x': No such file or directory") and for an empty one.
std::string read_text_file(const std::string& path);

// The "char" tokenizer of lib/text/tokenizer.h.
struct Tokenizer : TextTokenizer {
    // id -> token; each token is one code point in UTF-8, ids in increasing code-point order.
    std::vector<std::string> vocab;  // (V)

    // The distinct characters of `text`. Throws for invalid UTF-8 (naming the byte offset)
    // and for text with fewer than 2 distinct characters.
    static Tokenizer from_text(std::string_view text);
    // A vocabulary saved earlier (e.g. in a checkpoint). Validates it: at least 2 tokens, each
    // exactly one valid UTF-8 code point, no duplicates, sorted by code point.
    static Tokenizer from_vocab(std::vector<std::string> vocab);

    std::string name() const override { return "char"; }
    int size() const override { return int(vocab.size()); }

    // One id per character. Throws for invalid UTF-8 (naming the byte offset) and for a
    // character outside the vocabulary (naming it, e.g. 'é' (U+00E9), and its byte offset).
    std::vector<int> encode(std::string_view text) const override;
    // The concatenated tokens of ids[0..n). Throws for an id outside [0, V).
    std::string decode(const int* ids, size_t n) const override;  // ids (n)

private:
    // code_points_[id] is the code point of vocab[id] (increasing): encode binary-searches it.
    // Kept in step with vocab by from_text/from_vocab, the only ways to build a Tokenizer.
    std::vector<char32_t> code_points_;  // (V)
};

// nanoGPT's split: n = len(ids); train = ids[:int(n * train_fraction)], val = the rest.
// train_fraction must be in (0, 1].
struct Split {
    std::vector<int> train;  // (n_train)
    std::vector<int> val;    // (n - n_train)
};
Split split_train_val(const std::vector<int>& ids, double train_fraction = 0.9);

// nanoGPT's prepare.py for any tokenizer: the text is cut after int(n * train_fraction) of its
// n characters (as utf8_count_chars counts them), and each part is
// encoded on its own. With the char tokenizer (one id per character) this is exactly
// split_train_val(tok.encode(text)); with GPT-2's BPE no token straddles the cut, so tiny
// Shakespeare gives nanoGPT's 301,966 train and 36,059 val tokens.
Split split_text(std::string_view text, const TextTokenizer& tok, double train_fraction = 0.9);

// B random windows of T+1 consecutive tokens (nanoGPT's get_batch): for each row b a start
// i = rng.below(len - T), uniform in [0, len - T - 1], then
//   idx[b, :] = ids[i : i+T],  targets[b, :] = ids[i+1 : i+T+1]
// so targets[b, t] is the token that follows idx[b, t]. A split shorter than T + 1 tokens
// throws, naming `split_name` ("the val split has 100 tokens; block_size 256 needs at least 257").
void sample_batch(int* idx,      // (B, T) out
                  int* targets,  // (B, T) out
                  const std::vector<int>& ids, int B, int T, Rng& rng,
                  std::string_view split_name = "");

// How many non-overlapping windows the `eval` app scores: starts i = 0, T, 2T, ... with
// i + T + 1 <= len (each window needs its T inputs plus one more token as the last target).
size_t eval_windows(size_t len, int T);

}  // namespace hg

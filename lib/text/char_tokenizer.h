// char_tokenizer.h — the "char" tokenizer: one token per character of the training text.
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

#include "lib/text/tokenizer.h"

namespace hg {

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

}  // namespace hg

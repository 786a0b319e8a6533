// char_tokenizer.cpp — see char_tokenizer.h.
#include "lib/text/char_tokenizer.h"

#include <algorithm>
#include <cstdint>
#include <memory>

#include "lib/core/errors.h"
#include "lib/text/utf8.h"

namespace hg {

namespace {

// Like utf8_next, but an invalid sequence throws, naming the offending byte and its offset.
size_t utf8_next_or_fail(std::string_view s, size_t pos, char32_t& cp) {
    size_t len = utf8_next(s, pos, cp);
    if (len == 0)
        fail("the text is not valid UTF-8: byte 0x{:02X} at byte offset {} does not start a valid "
             "character",
             (unsigned char)s[pos], pos);
    return len;
}

// How an error message shows a character: 'x' (U+0078), 'é' (U+00E9), and for control
// characters, which would garble the message, only U+000A.
std::string describe(char32_t cp) {
    bool control = cp < 0x20 || (cp >= 0x7F && cp < 0xA0);
    std::string code = fmt::format("U+{:04X}", (unsigned)cp);
    return control ? code : fmt::format("'{}' ({})", utf8_encode(cp), code);
}

}  // namespace

Tokenizer Tokenizer::from_text(std::string_view text) {
    check(!text.empty(), "cannot build a vocabulary from empty text");
    // One bit for every code point U+0000..U+10FFFF, set for each that occurs; reading the set
    // bits in order (64 at a time) gives the sorted vocabulary.
    std::vector<uint64_t> seen(0x110000 / 64, 0);
    char32_t cp;
    for (size_t pos = 0, len; pos < text.size(); pos += len) {
        len = utf8_next_or_fail(text, pos, cp);
        seen[cp / 64] |= uint64_t(1) << (cp % 64);
    }
    std::vector<std::string> vocab;
    for (size_t w = 0; w < seen.size(); w++)
        for (uint64_t bits = seen[w]; bits != 0; bits &= bits - 1)  // clears the lowest set bit
            vocab.push_back(utf8_encode(char32_t(w * 64 + __builtin_ctzll(bits))));
    check(vocab.size() >= 2, "the text has only {} distinct character; a vocabulary needs at least 2",
          vocab.size());
    return from_vocab(std::move(vocab));
}

Tokenizer Tokenizer::from_vocab(std::vector<std::string> vocab) {
    check(!vocab.empty(), "the vocabulary is empty");
    check(vocab.size() >= 2, "the vocabulary has {} token; it needs at least 2", vocab.size());
    Tokenizer tok;
    tok.code_points_.reserve(vocab.size());
    for (size_t id = 0; id < vocab.size(); id++) {
        const std::string& s = vocab[id];
        char32_t cp = 0;
        size_t len = s.empty() ? 0 : utf8_next(s, 0, cp);
        check(len != 0 && len == s.size(),
              "vocabulary token {} (\"{}\", {} bytes) is not exactly one UTF-8 character", id,
              s.size() <= 16 ? s : s.substr(0, 16) + "...", s.size());
        if (id > 0) {
            char32_t prev = tok.code_points_.back();
            check(cp != prev, "vocabulary tokens {} and {} are both {}", id - 1, id, describe(cp));
            check(cp > prev, "the vocabulary is not sorted by code point: token {} is {}, token {} is {}",
                  id - 1, describe(prev), id, describe(cp));
        }
        tok.code_points_.push_back(cp);
    }
    tok.vocab = std::move(vocab);
    return tok;
}

std::vector<int> Tokenizer::encode(std::string_view text) const {
    std::vector<int> ids;
    ids.reserve(text.size());  // at most one id per byte
    char32_t cp;
    for (size_t pos = 0, len; pos < text.size(); pos += len) {
        len = utf8_next_or_fail(text, pos, cp);
        auto it = std::lower_bound(code_points_.begin(), code_points_.end(), cp);
        if (it == code_points_.end() || *it != cp)
            fail("character {} at byte offset {} is not in the vocabulary ({} tokens)", describe(cp),
                 pos, vocab.size());
        ids.push_back(int(it - code_points_.begin()));
    }
    return ids;
}

std::string Tokenizer::decode(const int* ids, size_t n) const {
    std::string out;
    out.reserve(n);
    for (size_t i = 0; i < n; i++) {
        check(ids[i] >= 0 && ids[i] < size(), "token id {} at position {} is outside the vocabulary [0, {})",
              ids[i], i, size());
        out += vocab[ids[i]];
    }
    return out;
}

}  // namespace hg

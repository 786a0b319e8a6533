// tokenizer.cpp — see tokenizer.h.
#include "lib/text/tokenizer.h"

#include <algorithm>
#include <charconv>

#include "lib/core/errors.h"
#include "lib/text/utf8.h"

namespace hg {

const std::string& check_tokenizer_name(const std::string& name) {
    check(name == "char" || name == "gpt2", "unknown tokenizer '{}' (char | gpt2)", name);
    return name;
}

void check_vocabulary(const std::string& tokenizer, const std::vector<std::string>& vocab, int vocab_size) {
    if (check_tokenizer_name(tokenizer) == "char") {
        check(int(vocab.size()) == vocab_size, "the char vocabulary has {} tokens but vocab_size is {}", vocab.size(),
              vocab_size);
        return;
    }
    check(vocab.empty(), "a gpt2 model carries no vocabulary of its own (got {} tokens)", vocab.size());
    check(vocab_size == kGpt2VocabSize, "a gpt2 model has vocab_size {} (got {})", kGpt2VocabSize, vocab_size);
}

std::vector<int> parse_ids(std::string_view text, int V) {
    std::vector<int> ids;
    const char* p = text.data();
    const char* end = p + text.size();
    const auto space = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; };
    while (true) {
        while (p < end && space(*p)) p++;
        if (p == end) return ids;
        const char* word = p;
        while (p < end && !space(*p)) p++;
        const std::string shown(word, std::min<size_t>(p - word, 40));
        int id = 0;
        const auto [stop, err] = std::from_chars(word, p, id);
        check(err != std::errc::invalid_argument && stop == p, "'{}' at position {} is not a token id (an integer)",
              shown, ids.size());
        check(err != std::errc::result_out_of_range, "token id {} at position {} is outside the vocabulary [0, {})",
              shown, ids.size(), V);
        ids.push_back(id);
    }
}

size_t count_characters(const TextTokenizer& tok, const int* ids, size_t n) {
    return utf8_count_chars(tok.decode(ids, n));
}

}  // namespace hg

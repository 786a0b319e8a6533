// tokenizer.cpp — see tokenizer.h.
#include "lib/text/tokenizer.h"

#include <algorithm>
#include <charconv>

#include "lib/text/bpe.h"
#include "lib/data/dataset.h"
#include "lib/core/errors.h"
#include "lib/text/utf8.h"

namespace hg {

const std::string& check_tokenizer_name(const std::string& name) {
    check(name == "char" || name == "gpt2", "unknown tokenizer '{}' (char | gpt2)", name);
    return name;
}

std::unique_ptr<TextTokenizer> make_tokenizer(const std::string& name, const std::vector<std::string>& char_vocab,
                                              const std::string& gpt2_dir) {
    if (check_tokenizer_name(name) == "char") return std::make_unique<Tokenizer>(Tokenizer::from_vocab(char_vocab));
    return std::make_unique<Gpt2Tokenizer>(Gpt2Tokenizer::load(gpt2_dir));
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

std::unique_ptr<TextTokenizer> checkpoint_tokenizer(const std::string& trained_with,
                                                    const std::vector<std::string>& vocab,
                                                    const std::string& requested, const std::string& gpt2_dir) {
    if (!requested.empty())
        check(check_tokenizer_name(requested) == trained_with,
              "--tokenizer={} but the checkpoint was trained with the {} tokenizer", requested, trained_with);
    std::unique_ptr<TextTokenizer> tok = make_tokenizer(trained_with, vocab, gpt2_dir);
    check(trained_with != "gpt2" || tok->size() == kGpt2VocabSize, "{}: GPT-2's files give {} tokens, not {}",
          gpt2_dir, tok->size(), kGpt2VocabSize);
    return tok;
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

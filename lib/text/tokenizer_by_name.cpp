// tokenizer_by_name.cpp — see tokenizer_by_name.h.
#include "lib/text/tokenizer_by_name.h"

#include "lib/core/errors.h"
#include "lib/text/bpe.h"
#include "lib/text/char_tokenizer.h"

namespace hg {

std::unique_ptr<TextTokenizer> make_tokenizer(const std::string& name, const std::vector<std::string>& char_vocab,
                                              const std::string& gpt2_dir) {
    if (check_tokenizer_name(name) == "char") return std::make_unique<Tokenizer>(Tokenizer::from_vocab(char_vocab));
    return std::make_unique<Gpt2Tokenizer>(Gpt2Tokenizer::load(gpt2_dir));
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

}  // namespace hg

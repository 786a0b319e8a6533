// tokenizer.cpp — see tokenizer.h.
#include "lib/tokenizer.h"

#include "lib/bpe.h"
#include "lib/data.h"
#include "lib/errors.h"

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

}  // namespace hg

// tokenizer_by_name.h — the tokenizer an app asks for by name, or the one a checkpoint's model
// was trained with: "char" (lib/text/char_tokenizer.h) or "gpt2" (lib/text/bpe.h).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "lib/text/tokenizer.h"

namespace hg {

// The tokenizer called `name`: "char" over `char_vocab` (e.g. a checkpoint's vocabulary, or
// Tokenizer::from_text(text).vocab), "gpt2" from the encoder.json and vocab.bpe in `gpt2_dir`.
// Each ignores the other's argument.
std::unique_ptr<TextTokenizer> make_tokenizer(const std::string& name, const std::vector<std::string>& char_vocab,
                                              const std::string& gpt2_dir);

// The tokenizer a checkpoint's model was trained with (`trained_with`, and its char vocabulary),
// for the apps that read one. `requested` is the app's --tokenizer ("" when not given): naming
// another tokenizer is an hg::Error, since the model's ids would mean other tokens.
std::unique_ptr<TextTokenizer> checkpoint_tokenizer(const std::string& trained_with,
                                                    const std::vector<std::string>& vocab,
                                                    const std::string& requested, const std::string& gpt2_dir);

}  // namespace hg

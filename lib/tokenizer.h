// tokenizer.h — what every tokenizer offers: text -> ids, ids -> text, a vocabulary size, a name.
//
// Two tokenizers implement it, and the apps choose one by name (--tokenizer=char|gpt2):
//
//   "char"  one id per Unicode code point, over a vocabulary of distinct characters taken from
//           the training text or a checkpoint (hg::Tokenizer, lib/data.h);
//   "gpt2"  GPT-2's byte-level BPE, 50,257 ids, read from encoder.json and vocab.bpe
//           (hg::Gpt2Tokenizer, lib/bpe.h).
//
// decode(encode(text)) == text whenever encode succeeds. "char" throws for text outside its
// vocabulary; "gpt2" encodes every byte string.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hg {

struct TextTokenizer {
    virtual ~TextTokenizer() = default;
    virtual std::string name() const = 0;  // "char" | "gpt2"
    virtual int size() const = 0;          // V: the ids are 0 .. V-1
    virtual std::vector<int> encode(std::string_view text) const = 0;
    // The text of ids[0..n). Throws hg::Error for an id outside [0, V), naming it and its position.
    virtual std::string decode(const int* ids, size_t n) const = 0;  // ids (n)
};

// `name` if it is one of the tokenizers above; otherwise throws ("unknown tokenizer 'x' (char | gpt2)").
const std::string& check_tokenizer_name(const std::string& name);

// The tokenizer called `name`: "char" over `char_vocab` (e.g. a checkpoint's vocabulary, or
// Tokenizer::from_text(text).vocab), "gpt2" from the encoder.json and vocab.bpe in `gpt2_dir`.
// Each ignores the other's argument.
std::unique_ptr<TextTokenizer> make_tokenizer(const std::string& name, const std::vector<std::string>& char_vocab,
                                              const std::string& gpt2_dir);

}  // namespace hg

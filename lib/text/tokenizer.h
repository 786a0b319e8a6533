// tokenizer.h — what every tokenizer offers: text -> ids, ids -> text, a vocabulary size, a name.
//
// Two tokenizers implement it, and the apps choose one by name (--tokenizer=char|gpt2,
// lib/text/tokenizer_by_name.h):
//
//   "char"  one id per Unicode code point, over a vocabulary of distinct characters taken from
//           the training text or a checkpoint (hg::Tokenizer, lib/text/char_tokenizer.h);
//   "gpt2"  GPT-2's byte-level BPE, 50,257 ids, read from encoder.json and vocab.bpe
//           (hg::Gpt2Tokenizer, lib/text/bpe.h).
//
// decode(encode(text)) == text whenever encode succeeds. "char" throws for text outside its
// vocabulary; "gpt2" encodes every byte string.
//
// A checkpoint records which one its model was trained with (lib/checkpoint/checkpoint.h):
// "char" with its vocabulary, "gpt2" by name alone. A gpt2 model has exactly 50,257 token rows.
// nanoGPT pads its from-scratch vocabulary to 50,304 (a multiple of 64) for GPU matmul tiles;
// OpenAI's weights have 50,257 rows, and handgrad does not pad: every row is a token the
// tokenizer can decode.
#pragma once
#include <cstddef>
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

// GPT-2's vocabulary: 50,000 merges, 256 bytes, "<|endoftext|>".
inline constexpr int kGpt2VocabSize = 50257;

// `name` if it is one of the tokenizers above; otherwise throws ("unknown tokenizer 'x' (char | gpt2)").
const std::string& check_tokenizer_name(const std::string& name);

// Checks that a model's vocabulary belongs to its tokenizer: "char" with vocab_size tokens in
// `vocab`, "gpt2" with an empty `vocab` and vocab_size 50,257. hg::Error saying which part is off.
void check_vocabulary(const std::string& tokenizer, const std::vector<std::string>& vocab, int vocab_size);

// Token ids written as text (as build/tokenize prints them): the whitespace-separated integers
// of `text`. Anything else throws, naming the word and its position; so does an integer int
// cannot hold (as outside [0, V)). Whether each id is below V is for decode or the model to check.
std::vector<int> parse_ids(std::string_view text, int V);

// The characters (as utf8_count_chars counts them) in the text of ids[0..n): what bits per
// character divide by, so char and BPE models compare.
size_t count_characters(const TextTokenizer& tok, const int* ids, size_t n);  // ids (n)

}  // namespace hg

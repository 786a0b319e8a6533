// bpe.h — GPT-2's tokenizer: byte-level BPE over OpenAI's encoder.json and vocab.bpe.
//
// Encoding a text, as GPT-2 does it:
//
//   1. pre-tokenize: cut the text into pieces with GPT-2's pattern
//        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//      (contractions, lowercase only; a word with its leading space; a number; a run of other
//      symbols; white space, leaving the last space of a run to the word that follows it);
//   2. start each piece as its UTF-8 bytes, one token per byte (all 256 bytes are tokens);
//   3. merge: while some adjacent pair of tokens is a line of vocab.bpe, take the pair with the
//      lowest rank (line number) and join every occurrence of it, left to right;
//   4. the resulting tokens' ids in encoder.json.
//
// Files. encoder.json maps token -> id, and vocab.bpe lists the merges "left right", one a line
// in rank order after a "#version" line. Both spell bytes in GPT-2's printable byte alphabet
// (byte b is the character b itself for the 188 printable Latin-1 bytes, U+0100 + k for the
// k-th of the other 68: space is 'Ġ', newline 'Ċ'); loading turns every token back into raw
// bytes, so everything here works on bytes. Both files are validated when loaded: any flaw
// (missing, not JSON, an id twice or missing, a bad merge line, a token that is neither a byte
// nor made by a merge, as when vocab.bpe is cut short) throws hg::Error naming file and place.
//
// Decisions where GPT-2 leaves a choice open:
//   - "<|endoftext|>" (id 50256). encode() treats it as ordinary text, as tiktoken's
//     encode_ordinary and nanoGPT's data preparation do ("<|endoftext|>" -> 7 tokens);
//     encode_with_special() maps each occurrence to 50256, as tiktoken's
//     encode(allowed_special={"<|endoftext|>"}). decode(50256) is "<|endoftext|>" either way.
//   - Bytes that are not valid UTF-8. GPT-2's pattern runs on decoded text, which cannot hold
//     them. Here each invalid byte (lib/text/utf8.h) is a pre-token of its own, so it becomes its
//     single-byte token, and the valid runs between invalid bytes are pre-tokenized separately.
//     Valid UTF-8 encodes exactly as GPT-2 encodes the text, and decode(encode(x)) == x for
//     every byte string x.
//   - \s. Python's `regex` module (GPT-2) and tiktoken mean Unicode's White_Space property by
//     it; PCRE2's \s also matches U+180E, which Unicode stopped calling a space in 6.3. The
//     pattern is therefore compiled with \p{White_Space} where GPT-2 writes \s.
//     \p{L} and \p{N} follow PCRE2's Unicode tables (14.0 in Debian 12).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lib/text/tokenizer.h"

namespace hg {

// Where the data step (data/gpt2/prepare.sh) puts GPT-2's two files.
inline constexpr const char* kGpt2Dir = "data/gpt2";

class Gpt2Tokenizer : public TextTokenizer {
public:
    // DIR/encoder.json and DIR/vocab.bpe.
    static Gpt2Tokenizer load(const std::string& dir);
    static Gpt2Tokenizer load(const std::string& encoder_json_path, const std::string& vocab_bpe_path);

    std::string name() const override { return "gpt2"; }
    int size() const override { return int(tokens_.size()); }
    // "<|endoftext|>" in the text is ordinary text (see above). Accepts every byte string.
    std::vector<int> encode(std::string_view text) const override;
    // Every "<|endoftext|>" in the text is end_of_text(); the text between is encode()d.
    std::vector<int> encode_with_special(std::string_view text) const;
    std::string decode(const int* ids, size_t n) const override;  // ids (n)

    int end_of_text() const { return end_of_text_; }  // the id of "<|endoftext|>" (50256)
    const std::string& token(int id) const;  // its bytes; throws for an id outside [0, V)

private:
    Gpt2Tokenizer() = default;  // only load() makes one: a tokenizer always has its files
    struct Pattern;     // the compiled pre-tokenizer (PCRE2), shared by copies
    struct Workspace;   // one encode call's scratch: BPE buffers and its cache of pieces
    struct Merge {
        int rank;  // line of vocab.bpe, from 0
        int id;    // the merged token
    };
    static uint64_t pair_key(int left, int right) { return uint64_t(uint32_t(left)) << 32 | uint32_t(right); }
    static std::shared_ptr<const Pattern> compile_pattern();
    void encode_into(std::string_view text, Workspace& ws, std::vector<int>& out) const;
    void encode_piece(std::string_view piece, Workspace& ws, std::vector<int>& out) const;  // one pre-token
    void bpe(std::string_view piece, Workspace& ws, std::vector<int>& out) const;           // step 3

    std::vector<std::string> tokens_;              // (V) id -> bytes
    int byte_id_[256] = {};                        // the single-byte tokens
    std::unordered_map<uint64_t, Merge> merges_;   // pair_key(left id, right id) -> merge
    int end_of_text_ = -1;
    std::shared_ptr<const Pattern> pattern_;
};

}  // namespace hg

// dataset.h — a text as training data: split it into train / val, and cut random training
// windows (batches) and the evaluation's windows out of a split.
//
// The pipeline is nanoGPT's shakespeare_char prepare.py + get_batch, in C++:
//
//   text  = read_text_file(path)                    // the whole file, as bytes (lib/text/text_file.h)
//   tok   = Tokenizer::from_text(text)              // vocabulary = the distinct characters
//                                                   // (lib/text/char_tokenizer.h), or GPT-2's BPE
//   split = split_text(text, tok)                   // first 90 % of the characters train, the
//                                                   // rest val, each part encoded on its own
//   sample_batch(idx, targets, split.train, B, T, rng)   // B windows of T+1 tokens
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "lib/core/rng.h"
#include "lib/data/token_view.h"
#include "lib/text/tokenizer.h"

namespace hg {

// nanoGPT's split: n = len(ids); train = ids[:int(n * train_fraction)], val = the rest.
// train_fraction must be in (0, 1].
struct Split {
    std::vector<int> train;  // (n_train)
    std::vector<int> val;    // (n - n_train)
};
Split split_train_val(const std::vector<int>& ids, double train_fraction = 0.9);

// nanoGPT's prepare.py for any tokenizer: the text is cut after int(n * train_fraction) of its
// n characters (as utf8_count_chars counts them), and each part is
// encoded on its own. With the char tokenizer (one id per character) this is exactly
// split_train_val(tok.encode(text)); with GPT-2's BPE no token straddles the cut, so tiny
// Shakespeare gives nanoGPT's 301,966 train and 36,059 val tokens.
Split split_text(std::string_view text, const TextTokenizer& tok, double train_fraction = 0.9);

// B random windows of T+1 consecutive tokens (nanoGPT's get_batch): for each row b a start
// i = rng.below(len - T), uniform in [0, len - T - 1], then
//   idx[b, :] = ids[i : i+T],  targets[b, :] = ids[i+1 : i+T+1]
// so targets[b, t] is the token that follows idx[b, t]. A split shorter than T + 1 tokens
// throws, naming `split_name` ("the val split has 100 tokens; block_size 256 needs at least 257").
// `ids` is a vector or shards on disk alike (token_view.h): the windows of a split of many
// shards are drawn over their concatenation, exactly as over one array of the same tokens.
void sample_batch(int* idx,      // (B, T) out
                  int* targets,  // (B, T) out
                  const TokenView& ids, int B, int T, Rng& rng,
                  std::string_view split_name = "");

// How many non-overlapping windows the `eval` app scores: starts i = 0, T, 2T, ... with
// i + T + 1 <= len (each window needs its T inputs plus one more token as the last target).
size_t eval_windows(size_t len, int T);

}  // namespace hg

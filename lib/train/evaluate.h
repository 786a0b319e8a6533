// evaluate.h — a model's loss on a whole text: every non-overlapping window, each target once.
//
// Windows start at i = 0, T, 2T, ... with i + T + 1 <= len: inputs ids[i : i+T], targets
// ids[i+1 : i+T+1]. The loss is the mean over all windows·T targets (the tail shorter than a
// window is left out). Unlike Trainer::estimate_loss (a few random batches, cheap, noisy) this
// is the number to compare runs by: build/eval prints it, and a time-budgeted run ends with it.
#pragma once
#include <cstddef>
#include <vector>

#include "lib/data/token_view.h"
#include "lib/model/gpt.h"
#include "lib/text/tokenizer.h"

namespace hg {

struct WindowLoss {
    double loss = 0;    // mean cross-entropy, nats per token
    size_t tokens = 0;  // targets scored: windows · T
    size_t windows = 0;
    int T = 0;
    size_t characters = 0;  // what the scored targets spell (count_scored_characters); 0: not counted

    // The same loss in bits per character: the total nats / characters / ln 2. Characters, not
    // tokens, so that models with different tokenizers compare (for char models the two agree).
    double bits_per_char() const;
};

// Scores `ids` with windows of the model's block_size, model.max_B windows per forward pass
// (no dropout). hg::Error when ids holds no whole window.
WindowLoss windowed_loss(GPT<float>& model, const TokenView& ids);

// Sets w.characters to the characters of the targets w scored, ids[1 .. w.tokens] in `tok`'s text
// (the windows' targets follow each other without a gap).
void count_scored_characters(WindowLoss& w, const TokenView& ids, const TextTokenizer& tok);

}  // namespace hg

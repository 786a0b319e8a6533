// evaluate.cpp — see evaluate.h.
#include "lib/train/evaluate.h"

#include <algorithm>
#include <cmath>

#include "lib/core/errors.h"
#include "lib/data/dataset.h"

namespace hg {

WindowLoss windowed_loss(GPT<float>& model, const TokenView& ids) {
    WindowLoss r;
    r.T = model.config.block_size;
    r.windows = eval_windows(ids.size(), r.T);
    check(r.windows > 0, "the text has {} tokens; block_size {} needs at least {}", ids.size(), r.T, r.T + 1);
    check(r.T <= model.max_T, "the model was built for T <= {} (block_size is {})", model.max_T, r.T);
    std::vector<int> idx(size_t(model.max_B) * r.T), targets(size_t(model.max_B) * r.T);
    double sum = 0;  // Σ of per-token losses
    for (size_t w0 = 0; w0 < r.windows; w0 += size_t(model.max_B)) {
        const int B = int(std::min<size_t>(size_t(model.max_B), r.windows - w0));
        for (int b = 0; b < B; b++) {
            const size_t i = (w0 + b) * size_t(r.T);
            ids.copy(i, size_t(r.T), idx.data() + size_t(b) * r.T);
            ids.copy(i + 1, size_t(r.T), targets.data() + size_t(b) * r.T);
        }
        sum += gpt_forward(model, idx.data(), targets.data(), B, r.T) * B * r.T;
    }
    r.tokens = r.windows * size_t(r.T);
    r.loss = sum / double(r.tokens);
    return r;
}

double WindowLoss::bits_per_char() const {
    check(characters > 0, "bits per character need the characters counted");
    return loss * double(tokens) / double(characters) / std::log(2.0);
}

void count_scored_characters(WindowLoss& w, const TokenView& ids, const TextTokenizer& tok) {
    check(w.tokens < ids.size(), "the loss scored {} targets, the text has {} tokens", w.tokens, ids.size());
    // In pieces of 2^20 tokens: a split in files need not fit in memory as ints (a character that
    // GPT-2 spreads over two tokens at a piece boundary counts as its bytes there).
    std::vector<int> piece;
    w.characters = 0;
    for (size_t at = 0; at < w.tokens; at += size_t(1) << 20) {
        piece.resize(std::min(w.tokens - at, size_t(1) << 20));
        ids.copy(1 + at, piece.size(), piece.data());
        w.characters += count_characters(tok, piece.data(), piece.size());
    }
}

}  // namespace hg

// dataset.cpp — see dataset.h.
#include "lib/data/dataset.h"

#include <algorithm>

#include "lib/core/errors.h"
#include "lib/text/utf8.h"

namespace hg {

Split split_train_val(const std::vector<int>& ids, double train_fraction) {
    check(train_fraction > 0.0 && train_fraction <= 1.0, "train_fraction must be in (0, 1], got {}",
          train_fraction);
    // int(n * 0.9) in Python: the product in double, truncated. Same here, so the sizes agree.
    size_t n_train = size_t(double(ids.size()) * train_fraction);
    Split split;
    split.train.assign(ids.begin(), ids.begin() + n_train);
    split.val.assign(ids.begin() + n_train, ids.end());
    return split;
}

Split split_text(std::string_view text, const TextTokenizer& tok, double train_fraction) {
    check(train_fraction > 0.0 && train_fraction <= 1.0, "train_fraction must be in (0, 1], got {}",
          train_fraction);
    const size_t n_train = size_t(double(utf8_count_chars(text)) * train_fraction);  // int(n * 0.9), as in Python
    size_t cut = 0;
    for (size_t i = 0; i < n_train; i++) cut += utf8_char_bytes(text, cut);
    return Split{tok.encode(text.substr(0, cut)), tok.encode(text.substr(cut))};
}

void sample_batch(int* idx, int* targets, const TokenView& ids, int B, int T, Rng& rng,
                  std::string_view split_name) {
    check(B > 0 && T > 0, "batch_size ({}) and block_size ({}) must be positive", B, T);
    const size_t len = ids.size();
    check(len >= size_t(T) + 1, "the {}{}split has {} tokens; block_size {} needs at least {}",
          split_name, split_name.empty() ? "" : " ", len, T, size_t(T) + 1);
    for (int b = 0; b < B; b++) {
        // len - T possible starts: 0 .. len - T - 1, so that i + T (the last target) is in range.
        size_t i = rng.below(len - T);
        int* idx_b = idx + size_t(b) * T;
        int* targets_b = targets + size_t(b) * T;
        ids.copy(i, size_t(T), idx_b);
        std::copy(idx_b + 1, idx_b + T, targets_b);
        ids.copy(i + T, 1, targets_b + T - 1);
    }
}

size_t eval_windows(size_t len, int T) {
    check(T > 0, "block_size must be positive, got {}", T);
    if (len < size_t(T) + 1) return 0;
    // starts i = k·T for k = 0, 1, ..., with k·T <= len - T - 1
    return (len - size_t(T) - 1) / size_t(T) + 1;
}

}  // namespace hg

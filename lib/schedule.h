// schedule.h — the learning rate as a pure function of the iteration (nanoGPT's get_lr).
//
//   lr
//   learning_rate |      ____
//                 |    /      `-.
//                 |  /            `-.            linear warmup, then half a cosine
//          min_lr |/                  `-.______  down to min_lr, then flat
//                 +----+-----------------+------> iter
//                   warmup_iters    lr_decay_iters
//
//   iter <  warmup_iters:    learning_rate · (iter + 1) / (warmup_iters + 1)
//   iter >  lr_decay_iters:  min_lr
//   otherwise:               ratio = (iter - warmup_iters) / (lr_decay_iters - warmup_iters)  in [0, 1]
//                            coeff = 0.5 · (1 + cos(π · ratio))                                 1 -> 0
//                            min_lr + coeff · (learning_rate - min_lr)
//
// Warmup: Adam's second-moment estimate v is noisy for the first steps, so full-size steps
// then can throw the weights far; ramping lr up gives v time to settle. The cosine then
// anneals lr so the last steps refine rather than bounce. A pure function (no state) means a
// resumed run computes exactly the lr an uninterrupted one would.
#pragma once

namespace hg {

struct LrSchedule {
    double learning_rate;  // peak lr, reached at the end of warmup
    double min_lr;         // floor after the decay (nanoGPT: learning_rate / 10)
    int warmup_iters;      // iterations of linear warmup
    int lr_decay_iters;    // iteration where the cosine reaches min_lr (nanoGPT: = max_iters)
    bool decay_lr = true;  // false: lr = learning_rate always (no warmup, no decay)
};

// Throws hg::Error for a schedule that makes no sense: learning_rate negative or not finite;
// and, when decay_lr, min_lr negative or above learning_rate, warmup_iters or lr_decay_iters
// negative, or warmup_iters > lr_decay_iters. (With decay_lr false the other fields are unused.)
void validate(const LrSchedule& s);

// The learning rate for iteration `iter` (0-based, >= 0). When warmup_iters == lr_decay_iters
// the cosine phase is empty: at that iteration the result is min_lr (nanoGPT would divide by 0).
double lr_at(const LrSchedule& s, int iter);

}  // namespace hg

// schedule.h — the learning rate as a pure function of the iteration (nanoGPT's get_lr).
//
//   lr
//   learning_rate |      ____
//                 |    /      `-.
//                 |  /            `-.            linear warmup, then half a cosine
//          min_lr |/                  `-.______  (or a straight line) down to min_lr, then flat
//                 +----+-----------------+------> iter
//                   warmup_iters    lr_decay_iters
//
//   iter <  warmup_iters:    learning_rate · (iter + 1) / (warmup_iters + 1)
//   iter >  lr_decay_iters:  min_lr
//   otherwise:               ratio = (iter - warmup_iters) / (lr_decay_iters - warmup_iters)  in [0, 1]
//                            coeff = 0.5 · (1 + cos(π · ratio))     (cosine)                     1 -> 0
//                                    1 - ratio                       (linear)                     1 -> 0
//                                    1 while ratio < 1 - f, then     (wsd: warmup, stable,        1 -> 0
//                                    1 - sqrt((ratio - (1 - f)) / f)  decay; f = cooldown_frac)
//                            min_lr + coeff · (learning_rate - min_lr)
//
// The cosine is nanoGPT's. The straight line spends less of the run near the peak and more of
// it at small learning rates; with min_lr = 0 it is the "linear decay to zero" that studies of
// fixed-budget training (Bergsma et al. 2025, "Straight to Zero") found best when a model sees
// many tokens per parameter, as the speedrun's does (about 10). wsd (warmup, stable, decay) holds the
// peak and spends only the last fraction f of the decay's iterations cooling down, along
// 1 - sqrt, which drops fast at first and then slowly; where the run ends alone decides when
// the cooldown starts.
//
// Re-plans (a time-budgeted run, lib/train/budget.h): a run that finds its steps slower or faster
// than planned moves the end of its decay. A re-plan at iteration I to a new end E keeps the
// ratio r_I reached at I and spreads the rest over [I, E]:
//   ratio = r_I + (1 - r_I) · (iter - I) / (E - I)       for iter >= I (up to the next re-plan)
// so the lr stays continuous and still reaches min_lr exactly at the last end. With no
// re-plans this is the formula above, to the bit.
//
// Warmup: Adam's second-moment estimate v is noisy for the first steps, so full-size steps
// then can throw the weights far; ramping lr up gives v time to settle. The decay then
// anneals lr so the last steps refine rather than bounce. A pure function (no state) means a
// resumed run computes exactly the lr an uninterrupted one would.
#pragma once

#include <string>
#include <vector>

namespace hg {

enum class LrDecay { Cosine, Linear, Wsd };

// From iteration `iter` on, the decay ends at iteration `end` (> iter) instead.
struct Replan {
    int iter;
    int end;
};

struct LrSchedule {
    double learning_rate;  // peak lr, reached at the end of warmup
    double min_lr;         // floor after the decay (nanoGPT: learning_rate / 10)
    int warmup_iters;      // iterations of linear warmup
    int lr_decay_iters;    // iteration where the decay reaches min_lr (nanoGPT: = max_iters)
    bool decay_lr = true;  // false: lr = learning_rate always (no warmup, no decay)
    LrDecay decay = LrDecay::Cosine;  // the shape of the decay from learning_rate to min_lr
    std::vector<Replan> replans = {};  // in order of iter, each at or after the warmup
    double cooldown_frac = 0.2;        // wsd: the fraction f of the decay spent cooling down, in (0, 1]
};

// Throws hg::Error for a schedule that makes no sense: learning_rate negative or not finite;
// and, when decay_lr, min_lr negative or above learning_rate, warmup_iters or lr_decay_iters
// negative, or warmup_iters > lr_decay_iters; a re-plan before the warmup's end or the previous
// re-plan, or with end <= iter; for wsd, cooldown_frac outside (0, 1]. (With decay_lr false the
// other fields are unused.)
void validate(const LrSchedule& s);

// The learning rate for iteration `iter` (0-based, >= 0). When warmup_iters == lr_decay_iters
// the decay phase is empty: at that iteration the result is min_lr (nanoGPT would divide by 0).
double lr_at(const LrSchedule& s, int iter);

// "cosine" | "linear" | "wsd", both ways (hg::Error naming an unknown one).
LrDecay parse_lr_decay(const std::string& s);
const char* to_string(LrDecay d);
// Re-plans as "ITER:END,ITER:END" (the train flag --lr_replans), both ways; "" is none.
std::vector<Replan> parse_replans(const std::string& s);
std::string to_string(const std::vector<Replan>& replans);

}  // namespace hg

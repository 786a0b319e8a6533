// train_config.cpp — see train_config.h.
#include "lib/train/train_config.h"

#include <nlohmann/json.hpp>

#include <cmath>

#include "lib/checkpoint/json_get.h"
#include "lib/core/errors.h"
#include "lib/core/named.h"

namespace hg {

using json = nlohmann::json;

static const Named<DType> kDTypes[] = {{DType::Float32, "float32"}, {DType::BFloat16, "bfloat16"}};
DType parse_dtype(const std::string& s) { return value_named(kDTypes, s, "dtype"); }
std::string to_string(DType d) { return name_of(kDTypes, d); }

void TrainConfig::validate() const {
    check(batch_size >= 1, "batch_size must be positive (got {})", batch_size);
    check(batch_threads >= 1 && batch_size % batch_threads == 0,
          "batch_threads ({}) must be positive and divide batch_size ({})", batch_threads, batch_size);
    // The upper bounds keep a typo from becoming a run that never finishes its first step or
    // evaluation: 65,536 micro-batches a step, a million batches an evaluation.
    check(gradient_accumulation_steps >= 1 && gradient_accumulation_steps <= (1 << 16),
          "gradient_accumulation_steps must be in [1, 65536] (got {})", gradient_accumulation_steps);
    check(max_iters >= 0, "max_iters must be >= 0 (got {})", max_iters);
    check(eval_interval >= 1, "eval_interval must be positive (got {})", eval_interval);
    check(eval_iters >= 1 && eval_iters <= 1000000, "eval_iters must be in [1, 1000000] (got {})", eval_iters);
    check(log_interval >= 1, "log_interval must be positive (got {})", log_interval);
    check(std::isfinite(grad_clip) && grad_clip >= 0, "grad_clip must be >= 0 (got {})", grad_clip);
    check(adamw.beta1 >= 0 && adamw.beta1 < 1, "beta1 must be in [0, 1) (got {})", adamw.beta1);
    check(adamw.beta2 >= 0 && adamw.beta2 < 1, "beta2 must be in [0, 1) (got {})", adamw.beta2);
    check(std::isfinite(adamw.eps) && adamw.eps > 0, "eps must be a finite number > 0 (got {})", adamw.eps);
    check(std::isfinite(adamw.weight_decay) && adamw.weight_decay >= 0, "weight_decay must be >= 0 (got {})",
          adamw.weight_decay);
    muon.validate();
    check(std::isfinite(time_budget) && time_budget >= 0, "time_budget must be >= 0 seconds (got {})", time_budget);
    hg::validate(schedule);
}

TrainConfig train_preset(const std::string& name) {
    TrainConfig t;  // the course: nanoGPT's README CPU recipe
    if (name == "shakespeare-char") {  // nanoGPT's config/train_shakespeare_char.py
        t.batch_size = 64, t.max_iters = 5000, t.eval_interval = 250, t.eval_iters = 200;
        t.schedule = {1e-3, 1e-4, 100, 5000, true};
    }
    if (name == "speedrun" || name == "speedrun-float32" || name == "speedrun-classic") {  // tools/speedrun_search.py
        t.batch_size = 16, t.max_iters = 6000, t.eval_interval = 1000, t.eval_iters = 10, t.log_interval = 100;
        t.schedule = {3e-3, 0.0, 200, 6000, true, LrDecay::Linear};  // warmup, then straight down to 0
        t.adamw.weight_decay = 0.3f;
        t.time_budget = 600;
    }
    if (name == "speedrun" || name == "speedrun-float32") {  // Muon for the blocks' matrices, at its own lr
        t.optimizer = OptimizerKind::Muon;                     // on the same schedule
        t.muon.lr = 1e-2f;
    }
    // bf16 on every machine: a preset is the same run wherever it runs. Its model was sized for
    // bf16's faster step (docs/speedrun.md); on a CPU without bf16 dot products its products
    // are widened to float, the same numbers at a slower pace than float's, and
    // speedrun-float32, the recipe in float on the model float's step affords, is the one to run.
    if (name == "speedrun") t.dtype = DType::BFloat16;
    if (name == "finetune-shakespeare") {  // nanoGPT's finetune_shakespeare.py, sized for a CPU (docs/gpt2.md)
        t.batch_size = 4, t.gradient_accumulation_steps = 2, t.max_iters = 20;  // 4 × 2 × 256 tokens a step
        t.eval_interval = 5, t.eval_iters = 2, t.log_interval = 1;
        t.schedule = {3e-5, 3e-5, 0, 20, false};  // a constant lr
        t.adamw.beta2 = 0.95f;                    // nanoGPT's default (the course's is 0.99)
    }
    return t;
}

std::string train_config_to_json(const TrainConfig& c, const std::string& extra) {
    json j = json::parse(extra, nullptr, /*allow_exceptions=*/false);
    check(j.is_object(), "train_config_to_json: extra is not a JSON object: {}", extra);
    const LrSchedule& s = c.schedule;
    j.update(json{{"batch_size", c.batch_size}, {"batch_threads", c.batch_threads},
                  {"gradient_accumulation_steps", c.gradient_accumulation_steps}, {"max_iters", c.max_iters},
                  {"eval_interval", c.eval_interval}, {"eval_iters", c.eval_iters}, {"log_interval", c.log_interval},
                  {"learning_rate", s.learning_rate}, {"min_lr", s.min_lr}, {"warmup_iters", s.warmup_iters},
                  {"lr_decay_iters", s.lr_decay_iters}, {"decay_lr", s.decay_lr}, {"lr_decay", to_string(s.decay)},
                  {"lr_replans", to_string(s.replans)}, {"cooldown_frac", s.cooldown_frac}, {"beta1", c.adamw.beta1},
                  {"beta2", c.adamw.beta2}, {"eps", c.adamw.eps}, {"weight_decay", c.adamw.weight_decay},
                  {"grad_clip", c.grad_clip},
                  {"optimizer", to_string(c.optimizer)}, {"muon_lr", c.muon.lr}, {"muon_momentum", c.muon.momentum},
                  {"muon_momentum_warmup", c.muon.momentum_warmup},
                  {"seed", c.seed}, {"time_budget", c.time_budget}, {"dtype", to_string(c.dtype)},
                  {"attention", to_string(c.activations.attention)},
                  {"recompute", to_string(c.activations.recompute)}});
    return j.dump();
}

TrainConfig train_config_from_json(const std::string& text, TrainConfig c) {
    const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    check(j.is_object(), "train_config is not a JSON object: {}", text);
    auto get = [&](const char* key, auto& out) {
        if (j.contains(key)) json_get(j, key, out, "train_config");
    };
    LrSchedule& s = c.schedule;
    get("batch_size", c.batch_size), get("batch_threads", c.batch_threads);
    get("gradient_accumulation_steps", c.gradient_accumulation_steps), get("max_iters", c.max_iters);
    get("eval_interval", c.eval_interval), get("eval_iters", c.eval_iters), get("log_interval", c.log_interval);
    get("learning_rate", s.learning_rate), get("min_lr", s.min_lr), get("warmup_iters", s.warmup_iters);
    get("lr_decay_iters", s.lr_decay_iters), get("decay_lr", s.decay_lr), get("cooldown_frac", s.cooldown_frac);
    std::string text_value;
    if (j.contains("lr_decay")) {
        get("lr_decay", text_value);
        s.decay = parse_lr_decay(text_value);
    }
    if (j.contains("lr_replans")) {
        get("lr_replans", text_value);
        s.replans = parse_replans(text_value);
    }
    get("beta1", c.adamw.beta1), get("beta2", c.adamw.beta2), get("eps", c.adamw.eps);
    get("weight_decay", c.adamw.weight_decay), get("grad_clip", c.grad_clip), get("seed", c.seed);
    get("time_budget", c.time_budget);
    if (j.contains("optimizer")) {
        get("optimizer", text_value);
        c.optimizer = parse_optimizer(text_value);
    }
    get("muon_lr", c.muon.lr), get("muon_momentum", c.muon.momentum);
    get("muon_momentum_warmup", c.muon.momentum_warmup);
    if (j.contains("dtype")) {
        get("dtype", text_value);
        c.dtype = parse_dtype(text_value);
    }
    if (j.contains("attention")) {
        get("attention", text_value);
        c.activations.attention = parse_attention(text_value);
    }
    if (j.contains("recompute")) {
        get("recompute", text_value);
        c.activations.recompute = parse_recompute(text_value);
    }
    return c;
}

}  // namespace hg

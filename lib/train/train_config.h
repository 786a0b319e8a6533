// train_config.h — how to train (as opposed to what the model is, config.h): the batch, the
// iterations, the learning-rate schedule, the optimizer (AdamW or Muon), clipping, the seed, the
// time budget; the training presets; and the JSON a checkpoint records them in.
#pragma once
#include <cstdint>
#include <string>

#include "lib/model/config.h"
#include "lib/optim/adamw.h"
#include "lib/optim/muon.h"
#include "lib/optim/schedule.h"

namespace hg {

// The number type of the products (lib/model/gpt.h, Bf16Copies): float32 everywhere, or bfloat16
// mixed precision — bf16 inputs to every linear layer's products, float for everything else.
// Never chosen automatically: float32 unless asked for.
enum class DType { Float32, BFloat16 };
DType parse_dtype(const std::string& s);  // "float32" | "bfloat16"; hg::Error otherwise
std::string to_string(DType d);

// The plan of a training run's models: attention and recomputation as given (--attention,
// --recompute), and no logits kept, since a training step reads only the loss (config.h).
inline ActivationPlan training_plan(AttentionKind attention, Recompute recompute) {
    ActivationPlan plan;
    plan.attention = attention, plan.recompute = recompute, plan.keep_logits = false;
    return plan;
}

struct TrainConfig {
    int batch_size = 12;
    int batch_threads = 1;  // R: threads that each take batch_size / R rows with a replica of the model (trainer.h)
    int gradient_accumulation_steps = 1;
    int max_iters = 2000;
    int eval_interval = 250;
    int eval_iters = 20;
    int log_interval = 10;
    LrSchedule schedule{1e-3, 1e-4, 100, 2000, true};
    AdamWConfig adamw{0.9f, 0.99f, 1e-8f, 0.1f};
    OptimizerKind optimizer = OptimizerKind::AdamW;  // muon: Muon for the blocks' matrices, AdamW for the rest (muon.h)
    MuonConfig muon;
    double grad_clip = 1.0;  // 0 disables
    uint64_t seed = 1337;
    double time_budget = 0;  // seconds of training (evaluation excluded); 0: train max_iters
    DType dtype = DType::Float32;
    ActivationPlan activations = training_plan(AttentionKind::Flash, Recompute::None);  // --attention, --recompute
    void validate() const;   // throws hg::Error naming the bad value
};

// The training half of a preset (the model half is hg::preset, config.h): nanoGPT's
// train_shakespeare_char.py for "shakespeare-char", the ten-minute recipe for "speedrun" (with
// Muon, in bf16 on every CPU: without bf16 dot products, slower than float), "speedrun-float32"
// (the same in float, for such a CPU) and "speedrun-classic" (AdamW alone, float;
// docs/speedrun.md), finetune_shakespeare.py cut to a CPU's size for "finetune-shakespeare", the
// course's recipe (the defaults above) for the others. No preset depends on the machine.
TrainConfig train_preset(const std::string& name);

// A TrainConfig as one JSON object, every field under its train flag's name ("batch_size",
// "learning_rate", "lr_replans": "ITER:END,..."), with the keys of the object `extra` (JSON
// text, e.g. the data path) beside them. And back: the keys present override `base`; a key of
// the wrong type or value is an hg::Error naming it; keys it does not know are ignored.
std::string train_config_to_json(const TrainConfig& c, const std::string& extra = "{}");
TrainConfig train_config_from_json(const std::string& json, TrainConfig base = {});

}  // namespace hg

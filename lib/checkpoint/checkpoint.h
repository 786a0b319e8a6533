// checkpoint.h — a trained model (and, for resuming, its optimizer) in one safetensors file.
//
// The model tensors are named and shaped exactly as nanoGPT's GPT.state_dict() (the tensor
// table's names: transformer.wte.weight, transformer.h.0.attn.c_attn.weight, ...), so the file
// loads into PyTorch with safetensors and load_state_dict. Where the config has no Q/K/V (or
// attention output) bias but nanoGPT's bias=True layout expects one, a zero tensor stands in.
// "__metadata__" holds:
//   config         JSON: vocab_size, block_size, n_layer, n_head, n_embd, dropout, bias,
//                  qkv_bias, bias_layout, tie_weights, pos_encoding, gelu, init, norm, mlp,
//                  rope_base, qk_norm, logit_softcap, init_zero_proj (a key that is absent
//                  takes GPTConfig's default, the GPT-2 block's)
//   tokenizer      "char" | "gpt2" (lib/text/tokenizer.h); absent = char
//   vocab          JSON array of the char tokenizer's token strings, in id order; [] for gpt2
//   iter_num, best_val_loss
//   and for resuming: adam_step, rng_batch (the batch sampler's state), train_config (JSON:
//   the TrainConfig, train_config.h, with the app's settings beside it),
//   world_size (the number of MPI ranks; absent = 1)
// AdamW's moments are tensors optim.m.<name> and optim.v.<name>, one pair per parameter (under
// Muon, a Muon matrix's optim.m is its momentum and its optim.v stays 0: muon.h).
// Everything is in one file so that one atomic rename replaces all of it at once.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lib/checkpoint/safetensors.h"
#include "lib/model/gpt.h"

namespace hg {

// Where training stands: what a resume needs besides the weights and the moments.
struct TrainProgress {
    int iter_num = 0;              // the next iteration to run
    double best_val_loss = 1e9;
    int adam_step = 0;             // AdamW steps taken (bias correction)
    uint64_t rng_batch = 0;        // the batch sampler's Rng state
    std::string train_config;      // the training config, JSON (train_config.h): informational, but for the
                                   // batch_threads that --batch_threads=auto resumes with
    int world_size = 1;            // the number of ranks (processes) that trained it; resume needs as many
};

std::string config_to_json(const GPTConfig& config);
GPTConfig config_from_json(const std::string& json);  // throws hg::Error naming a bad key

// Writes atomically (temp file, fsync, rename): the previous file survives any crash.
// m and v may be null (a weights-only checkpoint). `vocab` and `tokenizer` as check_vocabulary
// (lib/text/tokenizer.h) accepts them.
void save_checkpoint(const std::string& path, const GPT<float>& model,
                     const std::vector<std::string>& vocab, const TrainProgress& progress,
                     const float* m, const float* v, const std::string& tokenizer = "char");

// A checkpoint file, read and validated: the config and vocabulary are sane, every tensor of
// the table is there with its shape and dtype, and nothing unexpected is.
struct Checkpoint {
    GPTConfig config;
    std::string tokenizer = "char";   // what the model was trained with (lib/text/tokenizer.h)
    std::vector<std::string> vocab;   // the char tokenizer's; empty for gpt2
    TrainProgress progress;
    bool has_optimizer = false;
    SafetensorsFile file;

    static Checkpoint load(const std::string& path);
    // Copies the weights into a model built from `config`.
    void read_weights(GPT<float>& model) const;
    // Fine-tuning's start (nanoGPT's init_from): the weights into a model whose config is this
    // checkpoint's but for its dropout and a block_size no larger, which keeps the first
    // block_size rows of the position table (nanoGPT's crop_block_size). hg::Error for any
    // other difference, naming it.
    void read_weights_cropped(GPT<float>& model) const;
    // Copies AdamW's moments (num_parameters each, in table order); needs has_optimizer.
    void read_optimizer(const GPT<float>& model, float* m, float* v) const;
};

}  // namespace hg

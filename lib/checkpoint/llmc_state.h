// llmc_state.h — llm.c's debug state (gpt2_124M_debug_state.bin): what llm.c's test_gpt2.c
// checks its own forward and backward against, written here from handgrad's.
//
// A header of 256 int32 (header[0] = 20240327, [1] = 2, [2] = B, [3] = T, the rest 0), then,
// little-endian and back to back:
//
//   x       (B, T) int32     the inputs
//   y       (B, T) int32     the targets
//   logits  (B, T, V) float  V, not Vp: the padded columns are left out
//   loss    float            the mean cross-entropy
//   grads   float            d loss / d θ for every parameter, in the model file's order and
//                            sizes (llmc_model.h), wte's padding rows included (as zeros)
//
// The state is of one forward and backward pass: the model's last (gpt_forward with targets,
// then gpt_backward from zeroed gradients).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lib/model/gpt.h"

namespace hg {

constexpr int32_t kLlmcStateMagic = 20240327, kLlmcStateVersion = 2;

// Writes the state of `model`'s last forward and backward, atomically. Vp as the model file's
// (0: llmc_padded_vocab). hg::Error when the model is not one llm.c runs, its last forward had
// no targets, or its plan keeps no logits (ActivationPlan, config.h).
void save_llmc_state(const std::string& path, const GPT<float>& model, int Vp = 0);

// A debug state read back: the file names neither V nor the parameters, so the model's config
// and Vp say how long each part is; hg::Error unless the file is exactly that long.
struct LlmcState {
    int B = 0, T = 0;
    std::vector<int32_t> x, y;  // (B, T)
    std::vector<float> logits;  // (B, T, V)
    float loss = 0;
    std::vector<float> grads;   // llm.c's order, padding included

    static LlmcState load(const std::string& path, const GPTConfig& config, int Vp);
};

}  // namespace hg

// llmc_model.h — llm.c's GPT-2 model file (gpt2_124M.bin): read and write.
//
// The file is a header of 256 int32 and then every parameter, back to back, little-endian:
//
//   header[0] = 20240326 (the magic), header[1] = 3 (float32 numbers) or 5 (bfloat16),
//   header[2] = maxT (the position table's rows: block_size), [3] = V (the vocabulary),
//   [4] = L, [5] = NH, [6] = C, [7] = Vp (V padded up, 50304 for GPT-2's 50257); the rest 0.
//
//   wte (Vp, C)   wpe (maxT, C)
//   ln1w (L, C)   ln1b (L, C)   qkvw (L, 3C, C)   qkvb (L, 3C)   attprojw (L, C, C)  attprojb (L, C)
//   ln2w (L, C)   ln2b (L, C)   fcw (L, 4C, C)    fcb (L, 4C)    fcprojw (L, C, 4C)  fcprojb (L, C)
//   lnfw (C)      lnfb (C)
//
// Each per-block tensor is stacked over the L blocks (all L ln1w, then all L ln1b, ...), where
// handgrad's arena keeps each block's tensors together (lib/model/gpt.h); the matrices are
// (out, in) in both, and the logits use wte (the weights are tied, no lm_head). The rows V..Vp-1
// of wte are padding: written as zeros, never read back into a model.
//
// The model llm.c runs is GPT-2's block exactly: biases everywhere, tied weights, learned
// positions, LayerNorm, GELU in its tanh form, nothing else. A handgrad model of another kind
// has no llm.c file: check_llmc_model names the first difference.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lib/model/gpt.h"

namespace hg {

constexpr int32_t kLlmcModelMagic = 20240326;
constexpr int32_t kLlmcFloat32 = 3, kLlmcBfloat16 = 5;  // header[1]: how the numbers are stored
constexpr int kLlmcHeaderInts = 256;

// llm.c pads the vocabulary up to a multiple of 128 (50257 → 50304).
int llmc_padded_vocab(int V);

// hg::Error naming the first choice of `config` that llm.c's GPT-2 does not have.
void check_llmc_model(const GPTConfig& config);

// One visit per piece of llm.c's parameter order: `visit(ptr, n)` for n numbers of the model
// (float* ptr into p), or visit(nullptr, n) for n numbers of padding (wte's rows V..Vp-1). The same walk
// lays out the parameters (a model file) and their gradients (a debug state).
template <typename Visit>
void llmc_walk(const GPTConfig& c, int Vp, const ParameterTensors<float>& p, Visit&& visit) {
    const size_t V = c.vocab_size, C = c.n_embd, maxT = c.block_size;
    visit(p.wte, V * C);
    visit(static_cast<float*>(nullptr), (size_t(Vp) - V) * C);
    visit(p.wpe, maxT * C);
    // Every block's tensor of one kind, then the next kind.
    auto stacked = [&](float* BlockParameters<float>::*field, size_t n) {
        for (const BlockParameters<float>& b : p.h) visit(b.*field, n);
    };
    stacked(&BlockParameters<float>::ln_1_w, C), stacked(&BlockParameters<float>::ln_1_b, C);
    stacked(&BlockParameters<float>::attn_w, 3 * C * C), stacked(&BlockParameters<float>::attn_b, 3 * C);
    stacked(&BlockParameters<float>::attn_proj_w, C * C), stacked(&BlockParameters<float>::attn_proj_b, C);
    stacked(&BlockParameters<float>::ln_2_w, C), stacked(&BlockParameters<float>::ln_2_b, C);
    stacked(&BlockParameters<float>::fc_w, 4 * C * C), stacked(&BlockParameters<float>::fc_b, 4 * C);
    stacked(&BlockParameters<float>::mlp_proj_w, 4 * C * C), stacked(&BlockParameters<float>::mlp_proj_b, C);
    visit(p.ln_f_w, C), visit(p.ln_f_b, C);
}

// The tensors of `p` (parameters or gradients) in llm.c's order, padding included.
std::vector<float> llmc_order(const GPTConfig& config, int Vp, const ParameterTensors<float>& p);

// Writes the model's weights as an llm.c float32 model file, atomically (the previous file
// survives any failure). Vp = 0 pads as llm.c does (llmc_padded_vocab).
void save_llmc_model(const std::string& path, const GPT<float>& model, int Vp = 0);

// An llm.c model file, read and checked: the magic, the version, header values a GPT-2 can have,
// and a size that is exactly the header's. bfloat16 numbers are widened to float32 exactly.
struct LlmcModel {
    int version = kLlmcFloat32;
    int max_T = 0, V = 0, L = 0, NH = 0, C = 0, Vp = 0;
    std::vector<float> params;  // in the file's order, padding included

    static LlmcModel load(const std::string& path);
    // GPT-2's block at the file's sizes (block_size = maxT, dropout 0).
    GPTConfig config() const;
    // Copies the weights into a model built from config(); hg::Error for a model of another shape.
    void read_weights(GPT<float>& model) const;
};

}  // namespace hg

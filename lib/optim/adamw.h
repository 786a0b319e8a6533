// adamw.h — the optimizer: AdamW over every parameter tensor, and gradient-norm clipping.
//
// All parameters live in one arena (params), and so do their gradients, Adam's first
// moments m and second moments v, in the same layout: tensor k occupies
// [spans[k].offset, spans[k].offset + spans[k].size) in all four. The model's tensor table
// gives one ParamSpan per tensor (adamw_span), with `decays` true for its 2-D tensors: the
// linear layers' weights and the embeddings wte and wpe (lib/model/gpt.cpp, spec).
#pragma once
#include <cstddef>
#include <vector>

#include "lib/kernels/bf16.h"
#include "lib/model/gpt.h"

namespace hg {

struct AdamWConfig {
    float beta1 = 0.9f;          // decay rate of m (nanoGPT's default)
    float beta2 = 0.95f;         // decay rate of v (nanoGPT: 0.95 rather than Adam's 0.999)
    float eps = 1e-8f;           // keeps the division finite where v is ~0
    float weight_decay = 0.1f;   // applied to spans with decays = true only
};

struct ParamSpan {
    size_t offset;  // first element of the tensor in params / grads / m / v
    size_t size;    // its number of elements
    bool decays;    // weight decay on this tensor? (2-D tensors: yes; biases, norms' gains: no)
};

// A tensor of the model's table as AdamW updates it: its place, its size, its decay flag.
ParamSpan adamw_span(const TensorSpec& t);
// Every tensor of the table, for a run that trains them all with AdamW.
std::vector<ParamSpan> adamw_spans(const std::vector<TensorSpec>& table);

// One AdamW step (Loshchilov & Hutter, "Decoupled Weight Decay Regularization", 2019), per
// element of every span, with g the gradient and t = step (1-based):
//
//   p ← p · (1 − lr·wd)                  decoupled weight decay (wd = 0 when !decays)
//   m ← β1·m + (1 − β1)·g                running mean of g            (first moment)
//   v ← β2·v + (1 − β2)·g²               running mean of g²           (second moment)
//   m̂ = m / (1 − β1^t),  v̂ = v / (1 − β2^t)    bias correction: m, v start at 0, so early on
//                                             they underestimate; dividing by 1 − β^t undoes it
//   p ← p − lr · m̂ / (sqrt(v̂) + eps)     each coordinate's step is ~lr in size whatever the
//                                        scale of its gradient (m̂ / sqrt(v̂) is ~±1)
//
// computed as p − (lr / bc1) · m / (sqrt(v) / sqrt(bc2) + eps), PyTorch's exact arithmetic
// (lib/kernels/adamw.h), so results can be compared with torch.optim.AdamW bit for bit when
// fed the same scalars.
//
// Why "decoupled": plain Adam with L2 regularisation adds wd·p to the gradient, and then the
// division by sqrt(v̂) rescales the decay too: parameters with large gradients barely decay.
// AdamW shrinks p directly, outside the adaptive step, so every weight decays at the same
// rate lr·wd, as in SGD with weight decay.
//
// Why only the 2-D tensors (nanoGPT's rule): decay pulls parameters towards 0. For the matmul
// weights and the embeddings that is a useful prior (small weights, smoother functions). Biases
// and LayerNorm gains/offsets are few and set scales and shifts: pulling a LayerNorm gain
// towards 0 would shrink the activations, not regularise them. So spans with decays = false
// get wd = 0, and their p is not touched by the first line at all (multiplied by exactly 1).
//
// grad_scale multiplies each gradient as it is read (clip_scale's factor: clipping fused into
// this pass; grads itself is not changed).
//
// Large spans are split into fixed chunks updated by OpenMP threads; each element's update
// is independent of the others, so the result does not depend on the thread count.
// Throws hg::Error for step < 1 (bias correction would divide by 0).
void adamw_step(float* params,       // (P) updated in place
                const float* grads,  // (P)
                float* m,            // (P) first moments, updated in place (start at 0)
                float* v,            // (P) second moments, updated in place (start at 0)
                const std::vector<ParamSpan>& spans, float lr, const AdamWConfig& cfg,
                int step /* 1-based */, float grad_scale = 1.0f,
                bf16* params16 = nullptr);  // (P) or null: the weights' bf16 copies, refreshed in this pass

// sqrt(Σ g_i²), accumulated in double in a fixed order: the array is cut into chunks whose
// boundaries depend only on n, each chunk summed in a fixed order (eight interleaved running
// sums), and the chunk sums added in index order. Threads only decide who computes which chunk, so the result is bit-identical
// for any thread count.
double grad_global_norm(const float* grads, size_t n);  // grads (n)

// PyTorch's clip_grad_norm_: returns the norm before clipping; if max_norm > 0 and
// norm > max_norm, scales every gradient by max_norm / (norm + 1e-6), so the new norm is
// just under max_norm. Clipping bounds the step after a rare huge gradient (a loss spike)
// while leaving the direction unchanged. max_norm <= 0 disables clipping.
double clip_grad_norm(float* grads, size_t n, double max_norm);  // grads (n) scaled in place

// clip_grad_norm's factor for a gradient of norm `norm`: max_norm / (norm + 1e-6) rounded to
// float when max_norm > 0 and norm > max_norm, else exactly 1. Trainer::step passes it to
// adamw_step instead of scaling the gradient in a pass of its own: the same bits, one pass
// over the parameters fewer.
float clip_scale(double norm, double max_norm);

}  // namespace hg

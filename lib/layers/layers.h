// layers.h — every layer, its two implementations, and what every backward writes and what it
// adds.
//
// Two implementations, two names. Each layer header declares
//   x_forward(float* ...)              the fast path: sgemm, Highway kernels, threads (x.cpp)
//   x_forward_twin<real>(real* ...)    its scalar twin: the same math as plain loops, for any
//                                      number type, in the header, with the derivation above it
// with the same parameters (checked below). The model (lib/model/gpt_passes.cpp) is one template
// over the number type, and lib/model/gpt_choices.h names which one it runs: GPT<float> the fast
// path, GPT<double> the twin, which the whole-model gradient check needs (finite differences
// exact to ~1e-10). Tests run the twin in float to compare the SIMD path with it, and in double
// for the gradient checks. Where a fast path has more than one way to run (attention: fused
// kernels or sgemm, by shape), each way has a name of its own, and x_forward is the one that
// picks. Attention is also written twice as layers of their own: attention.h keeps the T×T
// probabilities, flash_attention.h one number per row, and the model's plan picks (gpt_choices.h);
// flash's fast path takes a working space per thread and its twin a tile size instead, so the two
// differ in those parameters and are not checked below.
//
// Parameters add, inputs write. Every backward
//   adds (+=) into the parameters' gradients: dwte, dwpe (encoder); dweight, dbias (linear,
//       LayerNorm, RMSNorm). Gradient accumulation over micro-batches, and a weight used twice
//       (tied embeddings), then sum up by themselves;
//   writes (=) the gradient of its input: dinp (linear, GELU, ReLU², SwiGLU, soft-cap,
//       dropout), dqkv (attention), dlogits (cross-entropy). Each is written whole, so nothing
//       is zeroed before a layer;
//   except the norms that read the residual stream, LayerNorm and RMSNorm, which add (+=) into
//       dinp. The stream's gradient dx also arrives unchanged through the skip path
//       (residual.h); adding into dx is that sum's backward, so the model zeroes dx once per
//       backward and nothing else.
// RoPE and QK-norm change q and k in place inside qkv, and their backwards likewise turn the
// q and k parts of dqkv into the gradient before them, in place, leaving v's part as it is.
// llm.c adds everywhere and zeroes every activation gradient first; writing instead saves that
// pass over memory (docs/performance.md).
#pragma once
#include <type_traits>

#include "lib/layers/attention.h"
#include "lib/layers/crossentropy.h"
#include "lib/layers/dropout.h"
#include "lib/layers/encoder.h"
#include "lib/layers/flash_attention.h"
#include "lib/layers/gelu.h"
#include "lib/layers/layernorm.h"
#include "lib/layers/linear.h"
#include "lib/layers/qknorm.h"
#include "lib/layers/relu2.h"
#include "lib/layers/residual.h"
#include "lib/layers/rmsnorm.h"
#include "lib/layers/rope.h"
#include "lib/layers/softcap.h"
#include "lib/layers/swiglu.h"

namespace hg {

// fn's fast path takes exactly the parameters of its twin in float, so a test or the model can
// put one where the other was.
#define HG_SAME_AS_TWIN(fn)                                                      \
    static_assert(std::is_same_v<decltype(&fn), decltype(&fn##_twin<float>)>, \
                  #fn ": the fast path and its scalar twin must take the same parameters")

HG_SAME_AS_TWIN(encoder_forward);
HG_SAME_AS_TWIN(encoder_backward);
HG_SAME_AS_TWIN(layernorm_forward);
HG_SAME_AS_TWIN(layernorm_backward);
HG_SAME_AS_TWIN(linear_forward);
HG_SAME_AS_TWIN(linear_backward);
HG_SAME_AS_TWIN(attention_forward);
HG_SAME_AS_TWIN(attention_backward);
HG_SAME_AS_TWIN(gelu_forward);
HG_SAME_AS_TWIN(gelu_backward);
HG_SAME_AS_TWIN(dropout_forward);
HG_SAME_AS_TWIN(dropout_backward);
HG_SAME_AS_TWIN(residual_forward);
HG_SAME_AS_TWIN(crossentropy_forward);
HG_SAME_AS_TWIN(crossentropy_backward);
HG_SAME_AS_TWIN(rmsnorm_forward);
HG_SAME_AS_TWIN(rmsnorm_backward);
HG_SAME_AS_TWIN(qknorm_forward);
HG_SAME_AS_TWIN(qknorm_backward);
HG_SAME_AS_TWIN(rope_forward);
HG_SAME_AS_TWIN(rope_backward);
HG_SAME_AS_TWIN(swiglu_forward);
HG_SAME_AS_TWIN(swiglu_backward);
HG_SAME_AS_TWIN(relu2_forward);
HG_SAME_AS_TWIN(relu2_backward);
HG_SAME_AS_TWIN(softcap_forward);
HG_SAME_AS_TWIN(softcap_backward);

#undef HG_SAME_AS_TWIN

}  // namespace hg

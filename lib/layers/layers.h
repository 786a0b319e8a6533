// layers.h — every layer, how the model picks an implementation of each, and what every
// backward writes and what it adds.
//
// Two implementations under one name. Each layer header declares
//   hg::x_forward(float* ...)              the fast path: sgemm, Highway kernels, threads (x.cpp)
//   hg::twin::x_forward<real>(real* ...)   its scalar twin: the same math as plain loops, for any
//                                          number type, in the header
// with the same parameters. The model (lib/model/gpt_passes.cpp) is one template over the number type and
// sees both (`using namespace twin`). For float arguments both fit equally well and C++ prefers
// the plain function to the template, so GPT<float> runs the fast path; for double only the
// template fits, so GPT<double> runs the twins, which the whole-model gradient check needs
// (finite differences exact to ~1e-10). Nothing is listed per layer for this to work: the
// static_asserts at the end only keep each pair's signatures equal, since a fast path whose
// parameters drifted would leave GPT<float> quietly running the twin. Tests name the twin in
// full, twin::x_forward: in float to compare the SIMD path with it, in double for the checks.
//
// Parameters add, inputs write. Every backward
//   adds (+=) into the parameters' gradients: dwte, dwpe (encoder); dweight, dbias (linear,
//       LayerNorm, RMSNorm). Gradient accumulation over micro-batches, and a weight used twice
//       (tied embeddings), then sum up by themselves;
//   writes (=) the gradient of its input: dinp (linear, GELU, ReLU², SwiGLU, soft-cap,
//       dropout), dqkv (attention), dlogits (cross-entropy). Each is a fresh buffer, so nothing
//       is zeroed before a layer;
//   except the norms that read the residual stream, LayerNorm and RMSNorm, which add (+=) into
//       dinp. The stream's gradient dx also arrives unchanged through the skip path
//       (residual.h); adding into dx is that sum's backward, so the model zeroes dx once per
//       backward and nothing else.
// RoPE and QK-norm change q and k in place inside qkv, and their backwards likewise turn the
// q and k parts of dqkv into the gradient before them, in place, leaving v's part as it is.
// llm.c adds everywhere and zeroes every activation gradient first; writing instead saves that
// pass over memory (about 5 % of a training step on the small recipes, measured with bench).
#pragma once
#include <type_traits>

#include "lib/layers/attention.h"
#include "lib/layers/crossentropy.h"
#include "lib/layers/dropout.h"
#include "lib/layers/encoder.h"
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

// fn's fast path takes exactly the parameters of its twin in float.
#define HG_SAME_AS_TWIN(fn)                                                     \
    static_assert(std::is_same_v<decltype(&fn), decltype(&twin::fn<float>)>, \
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

// adamw.cpp — see adamw.h.
#include "lib/optim/adamw.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "lib/core/errors.h"
#include "lib/core/parallel.h"
#include "lib/kernels/adamw.h"

namespace hg {

namespace {

// Elements per piece of parallel work (lib/core/parallel.h): 16K floats = 64 KiB per array, large
// enough that a thread's share dwarfs the scheduling cost, small enough to spread a tensor over
// threads.
constexpr size_t kChunk = size_t(1) << 14;

}  // namespace

ParamSpan adamw_span(const TensorSpec& t) { return {t.offset, t.shape.numel(), t.decays}; }

std::vector<ParamSpan> adamw_spans(const std::vector<TensorSpec>& table) {
    std::vector<ParamSpan> spans;
    for (const TensorSpec& t : table) spans.push_back(adamw_span(t));
    return spans;
}

void adamw_step(float* params, const float* grads, float* m, float* v,
                const std::vector<ParamSpan>& spans, float lr, const AdamWConfig& cfg, int step,
                float grad_scale, bf16* params16) {
    check(step >= 1, "the AdamW step count is 1-based, got {}", step);
    // 1 − β^t in double (PyTorch: in Python floats), rounded once for the kernel.
    const float bc1 = float(1.0 - std::pow(double(cfg.beta1), step));
    const float bc2 = float(1.0 - std::pow(double(cfg.beta2), step));
    for (const ParamSpan& s : spans) {
        const float wd = s.decays ? cfg.weight_decay : 0.0f;
        for_pieces(s.size, kChunk, 1, [&](size_t i0, size_t n) {
            const size_t begin = s.offset + i0;
            adamw_update(params + begin, grads + begin, m + begin, v + begin, n, lr, cfg.beta1,
                         cfg.beta2, cfg.eps, wd, bc1, bc2, grad_scale,
                         params16 ? params16 + begin : nullptr);
        });
    }
}

double grad_global_norm(const float* grads, size_t n) {
    // At most kMaxChunks chunks, so the partial sums fit on the stack (no allocation per step).
    constexpr size_t kMaxChunks = 256;
    const size_t chunk = std::max(kChunk, (n + kMaxChunks - 1) / kMaxChunks);
    const size_t n_chunks = (n + chunk - 1) / chunk;
    std::array<double, kMaxChunks> partial{};
    for_pieces(n, chunk, 1, [&](size_t begin, size_t len) {
        // Eight running sums, element i into sum i mod 8 (a ragged end into a ninth), added up at
        // the end in a fixed order: one running sum waits for each add before the next (four
        // cycles or so), eight keep pace with memory.
        constexpr size_t kSums = 8;
        std::array<double, kSums> sums{};
        const float* g = grads + begin;
        size_t i = 0;
        for (; i + kSums <= len; i += kSums)
            for (size_t j = 0; j < kSums; j++) sums[j] += double(g[i + j]) * double(g[i + j]);
        double sum = 0;
        for (; i < len; i++) sum += double(g[i]) * double(g[i]);
        for (double s : sums) sum += s;
        partial[begin / chunk] = sum;
    });
    double sum = 0;
    for (size_t c = 0; c < n_chunks; c++) sum += partial[c];  // in index order, on one thread
    return std::sqrt(sum);
}

float clip_scale(double norm, double max_norm) {
    // PyTorch: clip_coef = max_norm / (total_norm + 1e-6), applied as a float multiply.
    return max_norm > 0 && norm > max_norm ? float(max_norm / (norm + 1e-6)) : 1.0f;
}

double clip_grad_norm(float* grads, size_t n, double max_norm) {
    const double norm = grad_global_norm(grads, n);
    const float scale = clip_scale(norm, max_norm);
    if (scale != 1.0f) {
        for_pieces(n, kChunk, 1, [&](size_t begin, size_t len) {
            for (size_t i = begin; i < begin + len; i++) grads[i] *= scale;
        });
    }
    return norm;
}

}  // namespace hg

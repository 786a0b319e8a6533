// llmc_state.cpp — llm.c's debug state (see llmc_state.h).
#include "lib/checkpoint/llmc_state.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "lib/checkpoint/atomic_file.h"
#include "lib/checkpoint/llmc_model.h"
#include "lib/core/errors.h"

namespace hg {

void save_llmc_state(const std::string& path, const GPT<float>& model, int Vp) {
    const GPTConfig& c = model.config;
    check_llmc_model(c);
    check(model.has_targets, "a debug state needs a forward pass with targets");
    check(model.acts.logits != model.acts.probs, "a debug state needs the logits, and this model's plan keeps none");
    if (Vp == 0) Vp = llmc_padded_vocab(c.vocab_size);
    check(Vp >= c.vocab_size, "padded vocabulary {} is smaller than the vocabulary {}", Vp, c.vocab_size);
    const size_t N = size_t(model.B) * model.T;
    std::vector<int32_t> header(256, 0);
    header[0] = kLlmcStateMagic, header[1] = kLlmcStateVersion, header[2] = model.B, header[3] = model.T;
    static_assert(sizeof(int) == sizeof(int32_t), "token ids are written as they are held");
    const float loss = float(model.loss);
    const std::vector<float> padding(size_t(Vp - c.vocab_size) * c.n_embd, 0.0f);
    std::vector<Bytes> pieces{{header.data(), header.size() * 4},
                              {model.inputs, N * 4},
                              {model.targets, N * 4},
                              {model.acts.logits, N * c.vocab_size * sizeof(float)},
                              {&loss, sizeof loss}};
    llmc_walk(c, Vp, model.grads, [&](const float* ptr, size_t n) {
        pieces.push_back({ptr ? ptr : padding.data(), n * sizeof(float)});
    });
    write_file_atomically(path, pieces);
}

LlmcState LlmcState::load(const std::string& path, const GPTConfig& config, int Vp) {
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
    check(f != nullptr, "cannot open {}: {}", path, std::strerror(errno));
    int32_t h[256];
    check(std::fread(h, 4, 256, f.get()) == 256, "{} is truncated: no header of 256 int32", path);
    check(h[0] == kLlmcStateMagic && h[1] == kLlmcStateVersion,
          "{}: not an llm.c debug state of version 2 (magic {}, version {})", path, h[0], h[1]);
    check(h[2] >= 1 && h[3] >= 1 && h[2] <= (1 << 16) && h[3] <= (1 << 16), "{}: B = {}, T = {} are not sizes",
          path, h[2], h[3]);
    LlmcState s;
    s.B = h[2], s.T = h[3];
    const size_t N = size_t(s.B) * s.T;
    s.x.resize(N), s.y.resize(N), s.logits.resize(N * config.vocab_size);
    s.grads.resize(parameter_count(config) + size_t(Vp - config.vocab_size) * config.n_embd);
    auto read = [&](void* out, size_t size, size_t count) {
        check(std::fread(out, size, count, f.get()) == count, "{} is truncated", path);
    };
    read(s.x.data(), 4, N), read(s.y.data(), 4, N), read(s.logits.data(), 4, s.logits.size());
    read(&s.loss, 4, 1), read(s.grads.data(), 4, s.grads.size());
    check(std::fgetc(f.get()) == EOF, "{} is longer than this model's debug state", path);
    return s;
}

}  // namespace hg

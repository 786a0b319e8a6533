// llmc_model.cpp — llm.c's model file (see llmc_model.h).
#include "lib/checkpoint/llmc_model.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "lib/checkpoint/atomic_file.h"
#include "lib/core/errors.h"

namespace hg {

int llmc_padded_vocab(int V) { return (V + 127) / 128 * 128; }

void check_llmc_model(const GPTConfig& c) {
    auto need = [](bool ok, const char* what, const std::string& has) {
        check(ok, "llm.c's GPT-2 has {}; this model has {}", what, has);
    };
    need(c.bias == BiasLayout::GPT2, "the gpt2 bias layout", to_string(c.bias));
    need(c.tie_weights, "tied weights (no lm_head)", "an lm_head of its own");
    need(c.pos == PosEncoding::Learned, "learned positions", to_string(c.pos) + " positions");
    need(c.norm == NormKind::LayerNorm, "LayerNorm", to_string(c.norm));
    need(c.mlp == MlpKind::Gelu, "a GELU MLP", to_string(c.mlp));
    need(c.gelu == GeluKind::Tanh, "GELU's tanh form (--gelu=tanh)", "GELU's " + to_string(c.gelu) + " form");
    need(!c.qk_norm, "no QK-norm", "qk_norm");
    need(c.logit_softcap == 0, "no logit soft cap", "logit_softcap " + std::to_string(c.logit_softcap));
}

std::vector<float> llmc_order(const GPTConfig& config, int Vp, const ParameterTensors<float>& p) {
    std::vector<float> out;
    llmc_walk(config, Vp, p, [&](const float* ptr, size_t n) {
        if (ptr) out.insert(out.end(), ptr, ptr + n);
        else out.insert(out.end(), n, 0.0f);
    });
    return out;
}

// The numbers a model file of these sizes holds, padding included (unsigned __int128: a
// header's values may be anything, and their products must not wrap).
static unsigned __int128 llmc_numbers(int max_T, int Vp, int L, int C) {
    using u128 = unsigned __int128;
    const u128 c = u128(C);
    return u128(Vp) * c + u128(max_T) * c + u128(L) * (12 * c * c + 13 * c) + 2 * c;
}

void save_llmc_model(const std::string& path, const GPT<float>& model, int Vp) {
    const GPTConfig& c = model.config;
    check_llmc_model(c);
    if (Vp == 0) Vp = llmc_padded_vocab(c.vocab_size);
    check(Vp >= c.vocab_size, "padded vocabulary {} is smaller than the vocabulary {}", Vp, c.vocab_size);
    std::vector<int32_t> header(kLlmcHeaderInts, 0);
    header[0] = kLlmcModelMagic, header[1] = kLlmcFloat32;
    header[2] = c.block_size, header[3] = c.vocab_size, header[4] = c.n_layer;
    header[5] = c.n_head, header[6] = c.n_embd, header[7] = Vp;
    const std::vector<float> padding(size_t(Vp - c.vocab_size) * c.n_embd, 0.0f);
    // The pieces point into the model's arena: nothing is copied.
    std::vector<Bytes> pieces{{header.data(), header.size() * sizeof(int32_t)}};
    llmc_walk(c, Vp, model.params, [&](const float* ptr, size_t n) {
        pieces.push_back({ptr ? ptr : padding.data(), n * sizeof(float)});
    });
    write_file_atomically(path, pieces);
}

LlmcModel LlmcModel::load(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    check(!fs::is_directory(path, ec), "{} is a directory, not an llm.c model file", path);
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
    check(f != nullptr, "cannot open {}: {}", path, std::strerror(errno));
    check(std::fseek(f.get(), 0, SEEK_END) == 0, "cannot read {}: not a regular file", path);
    const long size = std::ftell(f.get());
    check(size >= 0 && std::fseek(f.get(), 0, SEEK_SET) == 0, "cannot read {}: not a regular file", path);
    const size_t header_bytes = kLlmcHeaderInts * sizeof(int32_t);
    check(size_t(size) >= header_bytes, "{} is truncated: {} bytes, an llm.c model file has a header of {}", path,
          size, header_bytes);
    int32_t h[kLlmcHeaderInts];
    check(std::fread(h, 1, header_bytes, f.get()) == header_bytes, "cannot read {}", path);
    check(h[0] != 20240327, "{} is an llm.c debug state, not a model file", path);
    check(h[0] == kLlmcModelMagic, "{}: not an llm.c model file (magic {}, expected {})", path, h[0], kLlmcModelMagic);
    check(h[1] == kLlmcFloat32 || h[1] == kLlmcBfloat16,
          "{}: llm.c model version {} (3, float32, and 5, bfloat16, are read)", path, h[1]);
    const char* names[] = {"maxT", "V", "L", "NH", "C", "Vp"};
    for (int i = 2; i < 8; i++)
        check(h[i] >= 1 && h[i] <= (1 << 24), "{}: header value {} = {} is not a size", path, names[i - 2], h[i]);
    LlmcModel m;
    m.version = h[1];
    m.max_T = h[2], m.V = h[3], m.L = h[4], m.NH = h[5], m.C = h[6], m.Vp = h[7];
    check(m.Vp >= m.V, "{}: padded vocabulary Vp = {} is smaller than V = {}", path, m.Vp, m.V);
    try {
        m.config().validate();
    } catch (const Error& e) {
        fail("{}: {}", path, e.what());
    }
    const size_t width = m.version == kLlmcFloat32 ? 4 : 2;
    const unsigned __int128 numbers = llmc_numbers(m.max_T, m.Vp, m.L, m.C);
    const unsigned __int128 expected = header_bytes + numbers * width;
    check(expected == (unsigned __int128)size,
          "{}: the header (maxT {}, V {}, L {}, NH {}, C {}, Vp {}, {}) gives {} parameters = {:.0f} bytes, "
          "but the file has {} bytes", path, m.max_T, m.V, m.L, m.NH, m.C, m.Vp,
          width == 4 ? "float32" : "bfloat16", double(numbers), double(expected), size);
    m.params.resize(size_t(numbers));
    if (width == 4) {
        check(std::fread(m.params.data(), 4, m.params.size(), f.get()) == m.params.size(), "cannot read {}", path);
    } else {  // bfloat16 is the top half of a float32: widening is exact
        std::vector<uint16_t> half(m.params.size());
        check(std::fread(half.data(), 2, half.size(), f.get()) == half.size(), "cannot read {}", path);
        for (size_t i = 0; i < half.size(); i++) {
            const uint32_t bits = uint32_t(half[i]) << 16;
            std::memcpy(&m.params[i], &bits, 4);
        }
    }
    return m;
}

GPTConfig LlmcModel::config() const {
    GPTConfig c;
    c.vocab_size = V, c.block_size = max_T, c.n_layer = L, c.n_head = NH, c.n_embd = C, c.dropout = 0;
    c.bias = BiasLayout::GPT2, c.tie_weights = true, c.pos = PosEncoding::Learned;
    c.norm = NormKind::LayerNorm, c.mlp = MlpKind::Gelu, c.gelu = GeluKind::Tanh, c.init = InitScheme::GPT2;
    return c;
}

void LlmcModel::read_weights(GPT<float>& model) const {
    const GPTConfig& c = model.config;
    check_llmc_model(c);
    check(c.vocab_size == V && c.block_size == max_T && c.n_layer == L && c.n_head == NH && c.n_embd == C,
          "the llm.c file has V {}, maxT {}, L {}, NH {}, C {}; the model has V {}, block_size {}, L {}, NH {}, C {}",
          V, max_T, L, NH, C, c.vocab_size, c.block_size, c.n_layer, c.n_head, c.n_embd);
    gpt_own_parameters(model);  // hg::Error for a replica
    size_t at = 0;
    llmc_walk(c, Vp, model.params, [&](float* ptr, size_t n) {
        if (ptr) std::memcpy(ptr, params.data() + at, n * sizeof(float));
        at += n;
    });
}

}  // namespace hg

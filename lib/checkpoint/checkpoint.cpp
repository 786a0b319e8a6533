// checkpoint.cpp — model + optimizer state <-> one safetensors file (see checkpoint.h).
#include "lib/checkpoint/checkpoint.h"

#include <nlohmann/json.hpp>

#include <charconv>
#include <cmath>
#include <cstring>
#include <set>

#include "lib/checkpoint/json_get.h"
#include "lib/core/errors.h"
#include "lib/text/tokenizer.h"

namespace hg {

using json = nlohmann::json;

std::string config_to_json(const GPTConfig& c) {
    json j = {{"vocab_size", c.vocab_size},   {"block_size", c.block_size},
              {"n_layer", c.n_layer},         {"n_head", c.n_head},
              {"n_embd", c.n_embd},           {"dropout", c.dropout},
              {"bias", c.mlp_bias()},         {"qkv_bias", c.qkv_bias()},
              {"bias_layout", to_string(c.bias)}, {"tie_weights", c.tie_weights},
              {"pos_encoding", to_string(c.pos)}, {"gelu", to_string(c.gelu)},
              {"init", to_string(c.init)},    {"norm", to_string(c.norm)},
              {"mlp", to_string(c.mlp)},      {"rope_base", c.rope_base},
              {"qk_norm", c.qk_norm},         {"logit_softcap", c.logit_softcap},
              {"init_zero_proj", c.init_zero_proj}};
    return j.dump();
}

GPTConfig config_from_json(const std::string& text) {
    json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    check(j.is_object(), "checkpoint config is not a JSON object");
    auto get = [&](const char* key, auto& out) {
        check(j.contains(key), "checkpoint config has no '{}'", key);
        json_get(j, key, out, "checkpoint config");
    };
    GPTConfig c;
    get("vocab_size", c.vocab_size), get("block_size", c.block_size), get("n_layer", c.n_layer);
    get("n_head", c.n_head), get("n_embd", c.n_embd), get("dropout", c.dropout);
    get("tie_weights", c.tie_weights);
    if (j.contains("bias_layout")) {
        std::string s;
        get("bias_layout", s);
        c.bias = parse_bias_layout(s);
    } else {  // nanoGPT's two switches
        bool bias = true, qkv_bias = true;
        get("bias", bias);
        if (j.contains("qkv_bias")) get("qkv_bias", qkv_bias);
        c.bias = !bias ? BiasLayout::None : qkv_bias ? BiasLayout::GPT2 : BiasLayout::Course;
    }
    // The choices after nanoGPT's: a key that is absent keeps GPTConfig's default (the GPT-2
    // block's), so older files read as what they were.
    auto choice = [&](const char* key, auto parse, auto& out) {
        if (!j.contains(key)) return;
        std::string name;
        get(key, name);
        out = parse(name);
    };
    choice("pos_encoding", parse_pos_encoding, c.pos);
    choice("gelu", parse_gelu, c.gelu);
    choice("init", parse_init, c.init);
    choice("norm", parse_norm, c.norm);
    choice("mlp", parse_mlp, c.mlp);
    if (j.contains("rope_base")) get("rope_base", c.rope_base);
    if (j.contains("qk_norm")) get("qk_norm", c.qk_norm);
    if (j.contains("logit_softcap")) get("logit_softcap", c.logit_softcap);
    if (j.contains("init_zero_proj")) get("init_zero_proj", c.init_zero_proj);
    c.validate();
    return c;
}

// The zero tensors that stand in for attention biases the config does not have, so that a
// nanoGPT bias=True model loads the file. Name -> number of zeros.
static std::vector<std::pair<std::string, size_t>> standin_biases(const GPTConfig& c) {
    std::vector<std::pair<std::string, size_t>> out;
    if (!c.mlp_bias()) return out;  // nanoGPT bias=False has no biases at all
    const size_t C = c.n_embd;
    for (int l = 0; l < c.n_layer; l++) {
        const std::string pre = "transformer.h." + std::to_string(l) + ".attn.";
        if (!c.qkv_bias()) out.push_back({pre + "c_attn.bias", 3 * C});
        if (!c.attn_proj_bias()) out.push_back({pre + "c_proj.bias", C});
    }
    return out;
}

static std::vector<size_t> dims(const Shape& s) {
    return std::vector<size_t>(s.dims.begin(), s.dims.begin() + s.ndim);
}

void save_checkpoint(const std::string& path, const GPT<float>& model,
                     const std::vector<std::string>& vocab, const TrainProgress& progress,
                     const float* m, const float* v, const std::string& tokenizer) {
    const GPTConfig& c = model.config;
    check_vocabulary(tokenizer, vocab, c.vocab_size);
    SafetensorsWriter w;
    for (const TensorSpec& t : model.table)
        w.add(t.name, Dtype::F32, dims(t.shape), model.params_memory.data() + t.offset);
    const auto standins = standin_biases(c);
    size_t max_standin = 0;
    for (const auto& s : standins) max_standin = std::max(max_standin, s.second);
    std::vector<float> zeros(max_standin, 0.0f);
    for (const auto& [name, n] : standins) w.add(name, Dtype::F32, {n}, zeros.data());
    if (m && v) {
        for (const TensorSpec& t : model.table) {
            w.add("optim.m." + t.name, Dtype::F32, dims(t.shape), m + t.offset);
            w.add("optim.v." + t.name, Dtype::F32, dims(t.shape), v + t.offset);
        }
    }
    w.set_metadata("config", config_to_json(c));
    w.set_metadata("tokenizer", tokenizer);
    w.set_metadata("vocab", json(vocab).dump());
    w.set_metadata("iter_num", std::to_string(progress.iter_num));
    w.set_metadata("best_val_loss", fmt::format("{:.17g}", progress.best_val_loss));
    w.set_metadata("adam_step", std::to_string(progress.adam_step));
    w.set_metadata("rng_batch", std::to_string(progress.rng_batch));
    w.set_metadata("world_size", std::to_string(progress.world_size));
    w.set_metadata("train_config", progress.train_config.empty() ? "{}" : progress.train_config);
    w.save(path);
}

// A metadata integer, all of `s` and within Int's range (an int, or the sampler's uint64 state).
template <typename Int>
static Int parse_int(const std::string& path, const std::string& key, const std::string& s) {
    Int x = 0;
    const auto [end, err] = std::from_chars(s.data(), s.data() + s.size(), x);
    check(err == std::errc() && end == s.data() + s.size(), "{}: metadata '{}' is not an integer in range: '{}'",
          path, key, s);
    return x;
}

Checkpoint Checkpoint::load(const std::string& path) {
    Checkpoint ck{GPTConfig{}, "char", {}, {}, false, SafetensorsFile::load(path)};
    const auto& meta = ck.file.metadata();
    auto need = [&](const std::string& key) -> const std::string& {
        auto it = meta.find(key);
        check(it != meta.end(), "{}: not a handgrad checkpoint (no '{}' in its metadata)", path, key);
        return it->second;
    };
    try {
        ck.config = config_from_json(need("config"));
    } catch (const Error& e) {
        fail("{}: {}", path, e.what());
    }
    json vocab = json::parse(need("vocab"), nullptr, false);
    check(vocab.is_array(), "{}: metadata 'vocab' is not a JSON array", path);
    for (const json& tok : vocab) {
        check(tok.is_string(), "{}: vocabulary entry {} is not a string", path, tok.dump());
        ck.vocab.push_back(tok.get<std::string>());
    }
    if (meta.count("tokenizer")) ck.tokenizer = meta.at("tokenizer");
    try {
        check_vocabulary(ck.tokenizer, ck.vocab, ck.config.vocab_size);
    } catch (const Error& e) {
        fail("{}: {}", path, e.what());
    }
    ck.progress.iter_num = parse_int<int>(path, "iter_num", need("iter_num"));
    try {
        ck.progress.best_val_loss = std::stod(need("best_val_loss"));
    } catch (const std::exception&) {
        fail("{}: metadata 'best_val_loss' is not a number", path);
    }
    if (meta.count("adam_step")) ck.progress.adam_step = parse_int<int>(path, "adam_step", meta.at("adam_step"));
    check(ck.progress.iter_num >= 0 && ck.progress.adam_step >= 0, "{}: metadata 'iter_num' ({}) and 'adam_step' ({}) "
          "must be >= 0", path, ck.progress.iter_num, ck.progress.adam_step);
    if (meta.count("rng_batch")) ck.progress.rng_batch = parse_int<uint64_t>(path, "rng_batch", meta.at("rng_batch"));
    if (meta.count("train_config")) ck.progress.train_config = meta.at("train_config");
    if (meta.count("world_size")) {
        ck.progress.world_size = parse_int<int>(path, "world_size", meta.at("world_size"));
        check(ck.progress.world_size >= 1, "{}: metadata 'world_size' must be >= 1 (got {})", path,
              ck.progress.world_size);
    }

    // Every tensor the table expects, with its shape and dtype; nothing else.
    std::set<std::string> expected;
    const auto table = parameter_table(ck.config);
    for (const TensorSpec& t : table) {
        check(ck.file.has(t.name), "{}: tensor '{}' is missing", path, t.name);
        const auto& e = ck.file.get(t.name);
        check(e.dtype == Dtype::F32, "{}: tensor '{}' has dtype {}, expected F32", path, t.name, dtype_name(e.dtype));
        check(e.shape == t.shape, "{}: tensor '{}' has shape {}, expected {}", path, t.name, e.shape.str(),
              t.shape.str());
        expected.insert(t.name);
    }
    for (const auto& [name, n] : standin_biases(ck.config)) {
        check(ck.file.has(name), "{}: tensor '{}' is missing", path, name);
        std::vector<float> b(n);
        ck.file.read_f32(name, Shape{n}, b.data());
        for (float x : b)
            check(x == 0.0f, "{}: tensor '{}' is not zero, but the '{}' bias layout has no such bias",
                  path, name, to_string(ck.config.bias));
        expected.insert(name);
    }
    ck.has_optimizer = ck.file.has("optim.m." + table.front().name);
    if (ck.has_optimizer) {
        for (const TensorSpec& t : table)
            for (const char* which : {"optim.m.", "optim.v."}) {
                const std::string name = which + t.name;
                check(ck.file.has(name), "{}: tensor '{}' is missing", path, name);
                const auto& e = ck.file.get(name);
                check(e.dtype == Dtype::F32 && e.shape == t.shape,
                      "{}: tensor '{}' has dtype {} shape {}, expected F32 {}", path, name, dtype_name(e.dtype),
                      e.shape.str(), t.shape.str());
                expected.insert(name);
            }
    }
    for (const std::string& name : ck.file.names())
        check(expected.count(name) != 0, "{}: unexpected tensor '{}' for this config", path, name);
    return ck;
}

// Copies every tensor of model's table from `file`; a tensor the file holds with more rows (the
// position table of a longer context) gives its first rows.
static void copy_weights(const SafetensorsFile& file, GPT<float>& model) {
    float* params = gpt_own_parameters(model);
    for (const TensorSpec& t : model.table) {
        const auto& e = file.get(t.name);
        if (e.shape == t.shape) {
            file.read_f32(t.name, t.shape, params + t.offset);
        } else {  // Checkpoint::load has checked its dtype (F32); read_weights_cropped, its shape
            std::memcpy(params + t.offset, e.data, t.shape.numel() * sizeof(float));
        }
        const float* w = params + t.offset;
        for (size_t i = 0; i < t.shape.numel(); i++)
            check(std::isfinite(w[i]), "{}: tensor '{}' holds a non-finite value at {}", file.path(), t.name, i);
    }
}

void Checkpoint::read_weights(GPT<float>& model) const {
    check(config_to_json(model.config) == config_to_json(config), "{}: model config differs from the checkpoint's",
          file.path());
    copy_weights(file, model);
}

void Checkpoint::read_weights_cropped(GPT<float>& model) const {
    check(model.config.block_size <= config.block_size,
          "{}: block_size {} is longer than the checkpoint's {} (its position table has {} rows)", file.path(),
          model.config.block_size, config.block_size, config.block_size);
    GPTConfig same = model.config;
    same.block_size = config.block_size, same.dropout = config.dropout;
    check(config_to_json(same) == config_to_json(config),
          "{}: the model differs from the checkpoint's ({} against {}); only block_size and dropout may change",
          file.path(), config_to_json(same), config_to_json(config));
    copy_weights(file, model);
}

void Checkpoint::read_optimizer(const GPT<float>& model, float* m, float* v) const {
    check(has_optimizer, "{}: has no optimizer state to resume from", file.path());
    for (const TensorSpec& t : model.table) {
        file.read_f32("optim.m." + t.name, t.shape, m + t.offset);
        file.read_f32("optim.v." + t.name, t.shape, v + t.offset);
    }
}

}  // namespace hg

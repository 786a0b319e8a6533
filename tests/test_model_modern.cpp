// The GPT with today's pieces in its block — RMSNorm, rotary positions, SwiGLU and ReLU²,
// QK-norm, the logit soft cap, zero-initialised projections — verified as the GPT-2 block is
// (test_model.cpp): a gradient check of every parameter in double, for all of them at once and
// each alone; causality; the initial loss; exact parameter counts; checkpoints; bad input.
#include "tests/catch.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/checkpoint/checkpoint.h"
#include "lib/layers/encoder.h"
#include "lib/layers/swiglu.h"
#include "lib/model/count.h"
#include "tests/app_runner.h"
#include "tests/model_checks.h"

using namespace hg;
using namespace hg::test;
namespace fs = std::filesystem;

// Every modern choice on one config.
static GPTConfig all_modern(GPTConfig c) {
    c.norm = NormKind::RMSNorm, c.pos = PosEncoding::Rope, c.mlp = MlpKind::SwiGLU;
    c.qk_norm = true, c.logit_softcap = 30.0f;
    return c;
}

TEST_CASE("modern block: whole-model gradient check of every parameter tensor (double)",
          "[model][modern][gradcheck]") {
    GPTConfig c;  // tiny: V = 7, T = 3 of block 4, L = 2, two heads of hs = 4 (even, for rope)
    c.vocab_size = 7, c.block_size = 4, c.n_layer = 2, c.n_head = 2, c.n_embd = 8;
    // The cap in the checks is 2, not 30: the random weights give logits of a few units, and a
    // cap of 30 would leave tanh in its linear range, where a wrong backward could hide.
    SECTION("all modern: rmsnorm + rope + swiglu + qk_norm + softcap") {
        GPTConfig m = all_modern(c);
        m.logit_softcap = 2.0f;
        check_model_gradients(m, false);
    }
    SECTION("all modern, gpt2 bias layout, tied head, dropout 0.2 in training mode") {
        GPTConfig m = all_modern(c);
        m.logit_softcap = 2.0f, m.bias = BiasLayout::GPT2, m.tie_weights = true, m.dropout = 0.2f;
        check_model_gradients(m, true);
    }
    SECTION("all modern, relu2 MLP, no biases") {
        GPTConfig m = all_modern(c);
        m.logit_softcap = 2.0f, m.mlp = MlpKind::ReLU2, m.bias = BiasLayout::None;
        check_model_gradients(m, false);
    }
    SECTION("rmsnorm alone") {
        c.norm = NormKind::RMSNorm;
        check_model_gradients(c, false);
    }
    SECTION("rope alone (base 10000, and a small base that turns fast)") {
        c.pos = PosEncoding::Rope;
        check_model_gradients(c, false);
        c.rope_base = 3.0;
        check_model_gradients(c, false);
    }
    SECTION("swiglu alone") {
        c.mlp = MlpKind::SwiGLU;
        check_model_gradients(c, false);
    }
    SECTION("relu2 alone") {
        c.mlp = MlpKind::ReLU2;
        check_model_gradients(c, false);
    }
    SECTION("qk_norm alone") {
        c.qk_norm = true;
        check_model_gradients(c, false);
    }
    SECTION("softcap alone") {
        c.logit_softcap = 2.0f;
        check_model_gradients(c, false);
    }
}

// The table's rows for the new choices: names, shapes, roles, decay.
TEST_CASE("modern block: tensor table names, shapes, roles and decay", "[model][modern][count]") {
    const GPTConfig c = all_modern(preset("course"));  // C = 128, H = swiglu_hidden(128) = 352
    REQUIRE(swiglu_hidden(128) == 352);
    const std::vector<TensorSpec> table = parameter_table(c);
    auto find = [&](const std::string& name) -> const TensorSpec* {
        for (const TensorSpec& t : table)
            if (t.name == name) return &t;
        return nullptr;
    };
    CHECK(find("transformer.wpe.weight") == nullptr);          // rope: no position table
    CHECK(find("transformer.h.0.ln_1.bias") == nullptr);       // RMSNorm: no bias
    CHECK(find("transformer.ln_f.bias") == nullptr);
    const TensorSpec* gain = find("transformer.h.2.ln_2.weight");
    REQUIRE(gain != nullptr);
    CHECK(gain->shape == Shape({128}));
    CHECK(gain->role == Role::LayerNormWeight);
    CHECK_FALSE(gain->decays);
    const TensorSpec* fc = find("transformer.h.0.mlp.c_fc.weight");  // [W1; W3]
    REQUIRE(fc != nullptr);
    CHECK(fc->shape == Shape({704, 128}));
    CHECK(fc->decays);
    CHECK(fc->fan_in == 128);
    const TensorSpec* proj = find("transformer.h.0.mlp.c_proj.weight");  // W2
    REQUIRE(proj != nullptr);
    CHECK(proj->shape == Shape({128, 352}));
    CHECK(proj->fan_in == 352);
    CHECK(proj->residual);
    REQUIRE(find("transformer.h.0.mlp.c_fc.bias") != nullptr);  // the course layout's MLP biases
    CHECK(find("transformer.h.0.mlp.c_fc.bias")->shape == Shape({704}));
    CHECK_FALSE(find("transformer.h.0.mlp.c_fc.bias")->decays);
}

TEST_CASE("modern block: parameter counts of the course model, worked out by hand",
          "[model][modern][count]") {
    // The course model: V = 65, block 64, L = 4, C = 128, the course bias layout (no Q/K/V
    // bias), untied. GPT-2 block: 816,640.
    const GPTConfig base = preset("course");
    REQUIRE(parameter_count(base) == 816640);
    SECTION("rmsnorm: LayerNorm's biases go, 4 blocks × 2 norms × 128 + ln_f's 128 = 1,152") {
        GPTConfig c = base;
        c.norm = NormKind::RMSNorm;
        const ParameterBreakdown p = count_parameters(c);
        CHECK(p.total == 816640 - 1152);
        CHECK(p.block_layernorm == 4 * 2 * 128);
        CHECK(p.final_layernorm == 128);
    }
    SECTION("rope: no wpe, 64 × 128 = 8,192 fewer") {
        GPTConfig c = base;
        c.pos = PosEncoding::Rope;
        const ParameterBreakdown p = count_parameters(c);
        CHECK(p.total == 816640 - 8192);
        CHECK(p.position_embedding == 0);
        CHECK(p.embedding == 65 * 128);
    }
    SECTION("swiglu: H = 352; per block 704·128 + 704 + 128·352 + 128 = 136,000") {
        GPTConfig c = base;
        c.mlp = MlpKind::SwiGLU;
        const ParameterBreakdown p = count_parameters(c);
        CHECK(p.mlp == 4 * (704 * 128 + 704 + 128 * 352 + 128));
        CHECK(p.mlp == 544000);
        CHECK(p.total == 816640 - 526848 + 544000);
        CHECK(p.rule_of_thumb == 4 * (4 * 128 * 128 + 3 * 128 * 352));  // 802,816
    }
    SECTION("relu2, qk_norm, softcap, zero-initialised projections: no parameters of their own") {
        GPTConfig c = base;
        c.mlp = MlpKind::ReLU2;
        CHECK(parameter_count(c) == 816640);
        c = base, c.qk_norm = true;
        CHECK(parameter_count(c) == 816640);
        c = base, c.logit_softcap = 30.0f;
        CHECK(parameter_count(c) == 816640);
        c = base, c.init_zero_proj = true;
        CHECK(parameter_count(c) == 816640);
    }
    SECTION("all modern: 816,640 − 1,152 − 8,192 + 17,152 = 824,448") {
        const GPTConfig c = all_modern(base);
        const ParameterBreakdown p = count_parameters(c);
        CHECK(p.total == 824448);
        CHECK(p.attention == 4 * (3 * 128 * 128 + 128 * 128 + 128));  // c_attn, c_proj + its bias
        CHECK(p.lm_head == 65 * 128);
        GPT<float> m;  // the allocated model holds exactly the counted parameters
        gpt_build(m, c, 1, 8);
        CHECK(m.num_parameters == 824448);
        CHECK(m.table.back().offset + m.table.back().shape.numel() == 824448);
    }
    SECTION("FLOPs count SwiGLU's three matrices: 2·(blocks + C·V) per token") {
        const GPTConfig c = all_modern(base);
        const FlopCount f = count_flops(c, 64);
        CHECK(f.forward_weights == 2.0 * (double(count_parameters(c).blocks()) + 128.0 * 65));
        CHECK(f.attention == 4.0 * 64 * 128 * 4);
    }
    SECTION("shape table: no position embeddings, SwiGLU's (2H) and (H), RMSNorm, capped logits") {
        const auto shapes = shape_table(all_modern(base), 2, 64);
        auto has = [&](const std::string& stage, const Shape& shape) {
            for (const StageShape& s : shapes)
                if (s.stage == stage) return s.shape == shape;
            return false;
        };
        CHECK(has("token embeddings (rope: no wpe)", Shape({2, 64, 128})));
        CHECK(has("block 0 qkv (rope, qk_norm)", Shape({2, 64, 384})));
        CHECK(has("block 3 mlp gate | up", Shape({2, 64, 704})));
        CHECK(has("block 3 mlp hidden (swiglu)", Shape({2, 64, 352})));
        CHECK(has("final RMSNorm", Shape({2, 64, 128})));
        CHECK(has("logits (soft-capped)", Shape({2, 64, 65})));
    }
}

TEST_CASE("modern block: changing token t leaves every earlier position's logits bit-identical",
          "[model][modern][causality]") {
    GPTConfig rope = preset("course");
    rope.pos = PosEncoding::Rope;
    for (int changed : {0, 17, 63}) {
        check_causal(rope, changed);
        check_causal(all_modern(preset("course")), changed);
    }
}

TEST_CASE("modern block: initial loss ≈ ln V; zero projections make every block the identity",
          "[model][modern][initloss]") {
    const GPTConfig c = all_modern(preset("course"));
    const int B = 4, T = c.block_size;
    std::vector<int> idx(B * T), tgt(B * T);
    Rng rng(5);
    for (size_t i = 0; i < idx.size(); i++) idx[i] = int(rng.below(65)), tgt[i] = int(rng.below(65));
    GPT<float> m;
    gpt_build(m, c, B, T);
    // gpt2 init: the final RMSNorm's output has unit RMS, lm_head N(0, 0.02²), so each logit has
    // std ≈ 0.02·√128 ≈ 0.23 and the softmax is near-uniform: loss ≈ ln 65 = 4.174 (+ ~σ²/2).
    gpt_init(m, 1);
    const double lnV = std::log(65.0);
    CHECK(std::fabs(gpt_forward(m, idx.data(), tgt.data(), B, T) - lnV) < 0.05);
    m.config.init_zero_proj = true;
    gpt_init(m, 1);
    CHECK(std::fabs(gpt_forward(m, idx.data(), tgt.data(), B, T) - lnV) < 0.05);
    // attn.c_proj and mlp.c_proj are all zeros (weights and biases), nothing else is
    for (const TensorSpec& t : m.table) {
        const float* w = m.params_memory.data() + t.offset;
        size_t nonzero = 0;
        for (size_t i = 0; i < t.shape.numel(); i++) nonzero += w[i] != 0.0f;
        INFO(t.name);
        if (t.residual) CHECK(nonzero == 0);
        else if (t.role == Role::Weight || t.role == Role::Embedding) CHECK(nonzero == t.shape.numel());
    }
    // so each block adds exactly 0: the stream leaving the last block is the embeddings, bit for bit
    CHECK(std::memcmp(m.acts.h.back().res_3, m.acts.encoded, size_t(B) * T * 128 * sizeof(float)) == 0);
}

TEST_CASE("modern block: contexts beyond block_size are refused; the encoder without wpe",
          "[model][modern][errors]") {
    const GPTConfig c = all_modern(preset("course"));
    // Rope is defined for positions 0 .. block_size-1 only: its table has block_size rows.
    GPT<float> m;
    REQUIRE_THROWS_WITH(gpt_build(m, c, 1, c.block_size + 1), Catch::Contains("block_size"));
    gpt_build(m, c, 1, c.block_size);
    std::vector<int> idx(c.block_size + 1, 0);
    REQUIRE_THROWS_WITH(gpt_forward(m, idx.data(), nullptr, 1, c.block_size + 1), Catch::Contains("block_size"));
    // With rope the encoder gets no position table: out = wte[idx], in both implementations.
    const int V = 5, C = 7, B = 2, T = 3;
    const std::vector<float> wte = randn<float>(size_t(V) * C, 11);
    const std::vector<int> ids = {4, 0, 4, 2, 1, 3};
    std::vector<float> fast(B * T * C), slow(B * T * C);
    encoder_forward(fast.data(), ids.data(), wte.data(), nullptr, B, T, C, V);
    encoder_forward_twin(slow.data(), ids.data(), wte.data(), static_cast<const float*>(nullptr), B, T, C, V);
    for (int bt = 0; bt < B * T; bt++) {
        INFO("row " << bt);
        CHECK(std::memcmp(&fast[bt * C], &wte[ids[bt] * C], C * sizeof(float)) == 0);
        CHECK(std::memcmp(&slow[bt * C], &wte[ids[bt] * C], C * sizeof(float)) == 0);
    }
}

TEST_CASE("modern block: bad values are rejected with a clear message", "[model][modern][errors]") {
    GPTConfig c = preset("course"), b = c;
    auto rejects = [](const GPTConfig& bad, const std::string& phrase) {
        REQUIRE_THROWS_WITH(bad.validate(), Catch::Contains(phrase));
    };
    b.pos = PosEncoding::Rope, b.n_embd = 12, b.n_head = 4;  rejects(b, "even");  // hs = 3
    b = c; b.rope_base = 1.0;                                  rejects(b, "rope_base");
    b = c; b.rope_base = std::nan("");                         rejects(b, "rope_base");
    b = c; b.logit_softcap = -1.0f;                            rejects(b, "logit_softcap");
    b = c; b.logit_softcap = INFINITY;                         rejects(b, "logit_softcap");
    REQUIRE_THROWS_WITH(parse_norm("batchnorm"), Catch::Contains("batchnorm") && Catch::Contains("rmsnorm"));
    REQUIRE_THROWS_WITH(parse_mlp("geglu"), Catch::Contains("geglu") && Catch::Contains("swiglu"));
    REQUIRE_THROWS_WITH(parse_pos_encoding("alibi"), Catch::Contains("rope"));
    for (NormKind n : {NormKind::LayerNorm, NormKind::RMSNorm}) CHECK(parse_norm(to_string(n)) == n);
    for (MlpKind k : {MlpKind::Gelu, MlpKind::SwiGLU, MlpKind::ReLU2}) CHECK(parse_mlp(to_string(k)) == k);
    CHECK(parse_pos_encoding("rope") == PosEncoding::Rope);
}

TEST_CASE("modern block: checkpoints keep the choices in their config and round-trip exactly",
          "[model][modern][checkpoint]") {
    TempDir tmp("handgrad-modern-ckpt");
    const std::string path = (tmp.path / "m.safetensors").string();
    GPTConfig c = all_modern(preset("course"));
    c.rope_base = 500.0, c.init_zero_proj = true, c.logit_softcap = 15.0f;
    GPT<float> m;
    gpt_build(m, c, 1, 8);
    gpt_init(m, 3);
    std::vector<std::string> vocab;
    for (int i = 0; i < 65; i++) vocab.push_back(std::string(1, char(' ' + i)));
    save_checkpoint(path, m, vocab, TrainProgress{}, nullptr, nullptr);

    const Checkpoint ck = Checkpoint::load(path);
    CHECK(config_to_json(ck.config) == config_to_json(c));
    const nlohmann::json meta = nlohmann::json::parse(ck.file.metadata().at("config"));
    CHECK(meta.at("norm") == "rmsnorm");
    CHECK(meta.at("pos_encoding") == "rope");
    CHECK(meta.at("mlp") == "swiglu");
    CHECK(meta.at("qk_norm") == true);
    CHECK(meta.at("logit_softcap") == 15.0);
    CHECK(meta.at("rope_base") == 500.0);
    CHECK(meta.at("init_zero_proj") == true);
    CHECK_FALSE(ck.file.has("transformer.wpe.weight"));
    CHECK_FALSE(ck.file.has("transformer.ln_f.bias"));
    CHECK(ck.file.get("transformer.h.1.mlp.c_fc.weight").shape == Shape({704, 128}));
    GPT<float> m2;
    gpt_build(m2, ck.config, 1, 8);
    ck.read_weights(m2);
    CHECK(std::memcmp(m.params_memory.data(), m2.params_memory.data(), m.num_parameters * sizeof(float)) == 0);

    SECTION("a config without the new keys is the GPT-2 block") {
        nlohmann::json old = nlohmann::json::parse(config_to_json(preset("course")));
        for (const char* key : {"norm", "mlp", "rope_base", "qk_norm", "logit_softcap", "init_zero_proj"})
            old.erase(key);
        CHECK(config_to_json(config_from_json(old.dump())) == config_to_json(preset("course")));
    }
    SECTION("bad values of the new keys are named") {
        auto with = [&](const char* key, nlohmann::json value) {
            nlohmann::json j = nlohmann::json::parse(config_to_json(c));
            j[key] = value;
            return j.dump();
        };
        REQUIRE_THROWS_WITH(config_from_json(with("norm", "batchnorm")), Catch::Contains("batchnorm"));
        REQUIRE_THROWS_WITH(config_from_json(with("mlp", "geglu")), Catch::Contains("geglu"));
        REQUIRE_THROWS_WITH(config_from_json(with("logit_softcap", -2)), Catch::Contains("logit_softcap"));
        REQUIRE_THROWS_WITH(config_from_json(with("rope_base", "big")), Catch::Contains("rope_base"));
        REQUIRE_THROWS_WITH(config_from_json(with("qk_norm", "yes")), Catch::Contains("qk_norm"));
        REQUIRE_THROWS_WITH(config_from_json(with("rope_base", 0.5)), Catch::Contains("rope_base"));
    }
    SECTION("a file whose tensors do not fit the config is refused") {
        // the same tensors under a LayerNorm + GELU + learned-position config
        const GPTConfig gpt2_block = preset("course");
        SafetensorsWriter w;
        for (const TensorSpec& t : m.table)
            w.add(t.name, Dtype::F32, std::vector<size_t>(t.shape.dims.begin(), t.shape.dims.begin() + t.shape.ndim),
                  m.params_memory.data() + t.offset);
        w.set_metadata("config", config_to_json(gpt2_block));
        w.set_metadata("vocab", nlohmann::json(vocab).dump());
        w.set_metadata("iter_num", "0");
        w.set_metadata("best_val_loss", "1");
        w.save(path);
        REQUIRE_THROWS_WITH(Checkpoint::load(path),
                            Catch::Contains("transformer.wpe.weight") && Catch::Contains("missing"));
    }
}

// The apps: every new flag's bad values are one clear line; a modern model trains, resumes
// exactly, and samples past block_size by cropping its context.
static std::string modern_corpus() { return corpus(60, "now is the winter of our discontent made glorious summer.\n"); }

static const std::string kTinyModern = kTiny + " --norm=rmsnorm --pos=rope --mlp=swiglu --qk_norm --logit_softcap=30";

TEST_CASE("modern flags: bad values get one clear error line", "[apps][modern][errors]") {
    TempDir tmp("handgrad-modern-apps");
    const std::string data = write_file(tmp.path / "data.txt", modern_corpus());
    const std::string base = bin("train") + kTinyModern + " --max_iters=4 --lr_decay_iters=4 --data=" + data +
                             " --out_dir=" + (tmp.path / "out").string();
    expect_error(run(base + " --norm=batchnorm"), "batchnorm");
    expect_error(run(base + " --pos=alibi"), "alibi");
    expect_error(run(base + " --mlp=geglu"), "geglu");
    expect_error(run(base + " --rope_base=1"), "rope_base");
    expect_error(run(base + " --rope_base=ten"), "rope_base");
    expect_error(run(base + " --logit_softcap=-3"), "logit_softcap");
    expect_error(run(base + " --logit_softcap=nan"), "logit_softcap");
    expect_error(run(base + " --qk_norm=maybe"), "qk_norm");
    expect_error(run(base + " --init_zero_proj=sometimes"), "init_zero_proj");
    expect_error(run(base + " --n_embd=12 --n_head=4"), "even");  // rope with head size 3
    expect_error(run(bin("inspect") + " --pos=rope --n_embd=12 --n_head=2 --norm=rms"), "rms");
}

TEST_CASE("modern flags: train, resume, eval, sample past block_size, inspect", "[apps][modern]") {
    TempDir tmp("handgrad-modern-apps");
    const std::string data = write_file(tmp.path / "data.txt", modern_corpus());
    const std::string a = (tmp.path / "a").string(), b = (tmp.path / "b").string();
    const std::string common = kTinyModern + " --init_zero_proj --data=" + data +
                               " --lr_decay_iters=8 --eval_interval=4 --log_interval=4";
    const Run straight = run(bin("train") + common + " --max_iters=8 --out_dir=" + a);
    INFO(straight.output);
    REQUIRE(straight.status == 0);
    // the header line names the block's choices (not a GELU the model does not have)
    CHECK(straight.output.find("rmsnorm, rope positions (base 10000), swiglu, qk_norm, logit_softcap 30, "
                               "init_zero_proj") != std::string::npos);
    CHECK(straight.output.find("gelu") == std::string::npos);
    const Checkpoint ck = Checkpoint::load(a + "/ckpt.safetensors");
    CHECK(ck.config.norm == NormKind::RMSNorm);
    CHECK(ck.config.pos == PosEncoding::Rope);
    CHECK(ck.config.mlp == MlpKind::SwiGLU);
    CHECK(ck.config.qk_norm);
    CHECK(ck.config.logit_softcap == 30.0f);
    CHECK(ck.config.init_zero_proj);
    // resuming a modern run is exact, as a GPT-2 block's
    check_resume_exact(bin("train") + common, a, b, 4, 8);
    const Run eval = run(bin("eval") + " --ckpt=" + a + "/ckpt.safetensors --data=" + data + " --split=val");
    INFO(eval.output);
    CHECK(eval.status == 0);
    // 40 new tokens with block_size 16: the context is cropped to its last 16 tokens each step
    const Run sample = run(bin("sample") + " --out_dir=" + a + " --start=now --max_new_tokens=40 --threads=1");
    INFO(sample.output);
    REQUIRE(sample.status == 0);
    CHECK(sample.output.find("---------------") >= 3 + 40);
    const Run inspect = run(bin("inspect") + " --ckpt=" + a + "/ckpt.safetensors --causality");
    INFO(inspect.output);
    CHECK(inspect.status == 0);
    CHECK(inspect.output.find("15 of the 15 earlier positions bit-identical") != std::string::npos);
    const Run table = run(bin("inspect") + " --norm=rmsnorm --pos=rope --mlp=swiglu --qk_norm --logit_softcap=30");
    INFO(table.output);
    CHECK(table.status == 0);
    CHECK(table.output.find("824,448") != std::string::npos);
    CHECK(table.output.find("embeddings (wte; rope: no wpe)") != std::string::npos);
}

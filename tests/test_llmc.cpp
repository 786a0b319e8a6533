// llm.c's model file and debug state (lib/checkpoint/llmc_model.h, llmc_state.h): written and
// read back bit for bit, laid out as llm.c lays them out, refused in one line when wrong, and
// build/llmc's subcommands end to end.
#include "tests/catch.h"

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "lib/checkpoint/llmc_model.h"
#include "lib/checkpoint/llmc_state.h"
#include "lib/core/rng.h"
#include "tests/app_runner.h"

using namespace hg;
using namespace hg::test;
namespace fs = std::filesystem;

namespace {

// A small GPT-2 llm.c can run: V 70 (padded to 128), maxT 16, L 2, NH 2, C 8.
GPTConfig small_gpt2() {
    GPTConfig c = preset("gpt2");
    c.vocab_size = 70, c.block_size = 16, c.n_layer = 2, c.n_head = 2, c.n_embd = 8, c.gelu = GeluKind::Tanh;
    return c;
}

// Built for batches of (2, 16) and initialised, every number made distinct (biases and norms
// too, which the init leaves at 0 and 1), so that a tensor in the wrong place cannot go unseen.
void make_model(GPT<float>& model, uint64_t seed = 7) {
    gpt_build(model, small_gpt2(), 2, 16);
    gpt_init(model, seed);
    Rng rng(seed);
    for (size_t i = 0; i < model.num_parameters; i++) model.params_memory.data()[i] += float(0.1 * rng.normal());
}

std::vector<int32_t> ints_of(const std::string& bytes, size_t n) {
    std::vector<int32_t> h(n);
    std::memcpy(h.data(), bytes.data(), n * 4);
    return h;
}

std::string with_int(std::string bytes, size_t i, int32_t value) {
    std::memcpy(&bytes[i * 4], &value, 4);
    return bytes;
}

}  // namespace

TEST_CASE("llm.c model file: header, llm.c's tensor order, padding, bit-identical round trip", "[llmc]") {
    TempDir tmp("handgrad-llmc");
    GPT<float> model;
    make_model(model);
    const std::string path = (tmp.path / "m.bin").string();
    save_llmc_model(path, model);

    const std::string bytes = read_bytes(path);
    const size_t C = 8, V = 70, Vp = 128, T = 16, L = 2;
    CHECK(ints_of(bytes, 8) == std::vector<int32_t>{20240326, 3, 16, 70, 2, 2, 8, 128});
    CHECK(ints_of(bytes, 256)[8] == 0);
    REQUIRE(bytes.size() == 1024 + 4 * (model.num_parameters + (Vp - V) * C));
    // Where llm.c looks for each tensor, computed here from its layout, not from llmc_walk.
    auto at = [&](size_t index) {
        float x;
        std::memcpy(&x, bytes.data() + 1024 + 4 * index, 4);
        return x;
    };
    const size_t wpe = Vp * C, ln1w = wpe + T * C, ln1b = ln1w + L * C, qkvw = ln1b + L * C;
    const size_t qkvb = qkvw + L * 3 * C * C, attprojw = qkvb + L * 3 * C, attprojb = attprojw + L * C * C;
    const size_t ln2w = attprojb + L * C, ln2b = ln2w + L * C, fcw = ln2b + L * C, fcb = fcw + L * 4 * C * C;
    const size_t fcprojw = fcb + L * 4 * C, fcprojb = fcprojw + L * 4 * C * C, lnfw = fcprojb + L * C, lnfb = lnfw + C;
    const ParameterTensors<float>& p = model.params;
    for (size_t i : {size_t(0), V * C - 1}) CHECK(at(i) == p.wte[i]);
    for (size_t i = V * C; i < Vp * C; i++) REQUIRE(at(i) == 0.0f);  // the padding rows
    CHECK(at(wpe + 5) == p.wpe[5]);
    CHECK(at(ln1w + C + 1) == p.h[1].ln_1_w[1]);
    CHECK(at(ln1b + 2) == p.h[0].ln_1_b[2]);
    CHECK(at(qkvw + 3 * C * C + 17) == p.h[1].attn_w[17]);
    CHECK(at(qkvb + 3 * C + 4) == p.h[1].attn_b[4]);
    CHECK(at(attprojw + C * C + 9) == p.h[1].attn_proj_w[9]);
    CHECK(at(attprojb + 3) == p.h[0].attn_proj_b[3]);
    CHECK(at(ln2w + C + 7) == p.h[1].ln_2_w[7]);
    CHECK(at(ln2b + 6) == p.h[0].ln_2_b[6]);
    CHECK(at(fcw + 4 * C * C + 100) == p.h[1].fc_w[100]);
    CHECK(at(fcb + 4 * C + 31) == p.h[1].fc_b[31]);
    CHECK(at(fcprojw + 4 * C * C + 200) == p.h[1].mlp_proj_w[200]);
    CHECK(at(fcprojb + C + 5) == p.h[1].mlp_proj_b[5]);
    CHECK(at(lnfw + 2) == p.ln_f_w[2]);
    CHECK(at(lnfb + C - 1) == p.ln_f_b[C - 1]);

    const LlmcModel file = LlmcModel::load(path);
    CHECK(file.version == 3);
    CHECK(file.Vp == 128);
    CHECK(config_to_json(file.config()) == config_to_json(model.config));
    GPT<float> back;
    gpt_build(back, file.config(), 1, 1);
    file.read_weights(back);
    REQUIRE(back.num_parameters == model.num_parameters);
    CHECK(std::memcmp(back.params_memory.data(), model.params_memory.data(), 4 * model.num_parameters) == 0);
    // A model of another shape does not take the weights.
    GPTConfig other = small_gpt2();
    other.n_embd = 16;
    GPT<float> wrong;
    gpt_build(wrong, other, 1, 1);
    CHECK_THROWS_WITH(file.read_weights(wrong), Catch::Contains("C 8") && Catch::Contains("C 16"));
}

TEST_CASE("llm.c model file: bfloat16 (version 5) reads as the float32 numbers it holds", "[llmc]") {
    TempDir tmp("handgrad-llmc");
    GPT<float> model;
    make_model(model);
    // Numbers bfloat16 holds exactly: each float's top 16 bits.
    std::vector<uint16_t> top(model.num_parameters);
    for (size_t i = 0; i < model.num_parameters; i++) {
        uint32_t bits;
        std::memcpy(&bits, &model.params_memory.data()[i], 4);
        top[i] = uint16_t(bits >> 16), bits &= 0xffff0000u;
        std::memcpy(&model.params_memory.data()[i], &bits, 4);
    }
    const std::string f32 = (tmp.path / "f32.bin").string();
    save_llmc_model(f32, model);
    const std::string bytes = read_bytes(f32);
    std::string bf16 = with_int(bytes.substr(0, 1024), 1, 5);
    for (size_t i = 1024; i < bytes.size(); i += 4) bf16 += bytes.substr(i + 2, 2);  // little-endian: the top half
    const LlmcModel file = LlmcModel::load(write_file(tmp.path / "bf16.bin", bf16));
    CHECK(file.version == 5);
    GPT<float> back;
    gpt_build(back, file.config(), 1, 1);
    file.read_weights(back);
    CHECK(std::memcmp(back.params_memory.data(), model.params_memory.data(), 4 * model.num_parameters) == 0);
}

TEST_CASE("llm.c debug state: handgrad's batch, logits, loss and gradients in llm.c's order", "[llmc]") {
    TempDir tmp("handgrad-llmc");
    GPT<float> model;
    make_model(model);
    const int B = 2, T = 12, N = B * T;  // T below maxT: llm.c's test takes any T up to it
    std::vector<int> ids(N + 1);
    Rng rng(3);
    for (int& id : ids) id = int(rng.below(70));
    gpt_zero_grad(model);
    const double loss = gpt_forward(model, ids.data(), ids.data() + 1, B, T);
    gpt_backward(model);
    const std::string path = (tmp.path / "state.bin").string();
    save_llmc_state(path, model);

    CHECK(ints_of(read_bytes(path), 4) == std::vector<int32_t>{20240327, 2, B, T});
    const LlmcState s = LlmcState::load(path, model.config, 128);
    CHECK(s.B == B);
    CHECK(s.T == T);
    CHECK(std::vector<int>(s.x.begin(), s.x.end()) == std::vector<int>(ids.begin(), ids.end() - 1));
    CHECK(std::vector<int>(s.y.begin(), s.y.end()) == std::vector<int>(ids.begin() + 1, ids.end()));
    REQUIRE(s.logits.size() == size_t(N) * 70);
    CHECK(std::memcmp(s.logits.data(), model.acts.logits, s.logits.size() * 4) == 0);
    CHECK(s.loss == float(loss));
    // The gradients are d loss / d θ of this batch: a fresh model with the same weights, run
    // again, gives them bit for bit, each in the place llm.c reads it from.
    GPT<float> again;
    make_model(again);
    gpt_zero_grad(again);
    gpt_forward(again, ids.data(), ids.data() + 1, B, T);
    gpt_backward(again);
    const std::vector<float> expected = llmc_order(again.config, 128, again.grads);
    REQUIRE(s.grads.size() == expected.size());
    CHECK(std::memcmp(s.grads.data(), expected.data(), 4 * expected.size()) == 0);
    CHECK(s.grads[0] == again.grads.wte[0]);                     // dwte comes first
    CHECK(s.grads.back() == again.grads.ln_f_b[7]);              // dlnfb last
    for (size_t i = 70 * 8; i < 128 * 8; i++) REQUIRE(s.grads[i] == 0.0f);  // padding rows
    // The state of a forward with no targets does not exist.
    gpt_forward(model, ids.data(), nullptr, B, T);
    CHECK_THROWS_WITH(save_llmc_state(path + "2", model), Catch::Contains("targets"));
    CHECK(!fs::exists(path + "2"));
    // Nor that of a model whose probabilities took the logits' place.
    GPT<float> no_logits;
    ActivationPlan plan;
    plan.keep_logits = false;
    gpt_build<float>(no_logits, small_gpt2(), B, T, nullptr, plan);
    gpt_init(no_logits, 7);
    gpt_forward(no_logits, ids.data(), ids.data() + 1, B, T);
    CHECK_THROWS_WITH(save_llmc_state(path + "2", no_logits), Catch::Contains("logits"));
    CHECK(!fs::exists(path + "2"));
}

TEST_CASE("llm.c model file: a wrong header, size or model is one hg::Error", "[llmc][errors]") {
    TempDir tmp("handgrad-llmc");
    GPT<float> model;
    make_model(model);
    const std::string good = (tmp.path / "good.bin").string();
    save_llmc_model(good, model);
    const std::string bytes = read_bytes(good);
    auto refused = [&](const std::string& content, const std::string& phrase) {
        INFO(phrase);
        const std::string path = write_file(tmp.path / "bad.bin", content);
        CHECK_THROWS_WITH(LlmcModel::load(path), Catch::Contains(phrase) && Catch::Contains(path));
    };
    refused(with_int(bytes, 0, 20240520), "not an llm.c model file (magic 20240520");
    refused(with_int(bytes, 0, 20240327), "debug state");
    refused(with_int(bytes, 1, 4), "version 4");
    refused(bytes.substr(0, 1000), "truncated: 1000 bytes");
    refused(bytes.substr(0, bytes.size() - 4), "but the file has");
    refused(bytes + "x", "but the file has");
    refused(with_int(bytes, 4, 3), "but the file has");   // L 3: the header disagrees with the size
    refused(with_int(bytes, 7, 64), "Vp = 64 is smaller than V = 70");
    refused(with_int(bytes, 5, 3), "divisible");          // NH 3 does not divide C 8
    refused(with_int(bytes, 6, -1), "C = -1 is not a size");
    refused(with_int(bytes, 2, 1 << 30), "maxT = 1073741824 is not a size");
    refused(with_int(with_int(bytes, 6, 1 << 24), 4, 1 << 24), "too large");  // refused before any product
    refused("", "truncated: 0 bytes");
    CHECK_THROWS_WITH(LlmcModel::load(tmp.path.string()), Catch::Contains("is a directory"));
    CHECK_THROWS_WITH(LlmcModel::load((tmp.path / "none").string()), Catch::Contains("cannot open"));
    // A model llm.c does not run has no file; nothing is written.
    for (auto change : {+[](GPTConfig& c) { c.gelu = GeluKind::Erf; }, +[](GPTConfig& c) { c.tie_weights = false; },
                        +[](GPTConfig& c) { c.bias = BiasLayout::None; }, +[](GPTConfig& c) { c.qk_norm = true; },
                        +[](GPTConfig& c) { c.pos = PosEncoding::Rope; }}) {
        GPTConfig c = small_gpt2();
        change(c);
        GPT<float> m;
        gpt_build(m, c, 1, 1);
        CHECK_THROWS_WITH(save_llmc_model((tmp.path / "no.bin").string(), m), Catch::Contains("llm.c's GPT-2 has"));
        CHECK(!fs::exists(tmp.path / "no.bin"));
    }
}

TEST_CASE("build/llmc: export, import, debug-state, loss; bad files are one error line", "[llmc][apps]") {
    TempDir tmp("handgrad-llmc");
    const std::string dir = tmp.path.string();
    const std::string shape = " --preset=gpt2 --gelu=tanh --n_layer=1 --n_head=2 --n_embd=8 --block_size=8";
    Run r = run(bin("llmc") + " export" + shape + " --seed=5 --out=" + dir + "/m.bin");
    INFO(r.output);
    REQUIRE(r.status == 0);
    r = run(bin("llmc") + " import --model=" + dir + "/m.bin --out=" + dir + "/m.safetensors");
    REQUIRE(r.status == 0);
    // The checkpoint holds the weights of the fresh model the export drew.
    GPT<float> fresh;
    GPTConfig c = preset("gpt2");
    c.gelu = GeluKind::Tanh, c.n_layer = 1, c.n_head = 2, c.n_embd = 8, c.block_size = 8;
    gpt_build(fresh, c, 1, 1);
    gpt_init(fresh, 5);
    const Checkpoint ck = Checkpoint::load(dir + "/m.safetensors");
    CHECK(ck.tokenizer == "gpt2");
    GPT<float> back;
    gpt_build(back, ck.config, 1, 1);
    ck.read_weights(back);
    CHECK(std::memcmp(back.params_memory.data(), fresh.params_memory.data(), 4 * fresh.num_parameters) == 0);
    // And exported again from the checkpoint, the same file.
    r = run(bin("llmc") + " export --ckpt=" + dir + "/m.safetensors --out=" + dir + "/again.bin");
    REQUIRE(r.status == 0);
    CHECK(read_bytes(dir + "/again.bin") == read_bytes(dir + "/m.bin"));

    std::string ids;
    for (int i = 0; i < 2 * 4 * 8 + 1; i++) ids += std::to_string(i * 7919 % 50257) + " ";
    write_file(dir + "/ids.txt", ids);
    r = run(bin("llmc") + " debug-state --matmul=openblas --model=" + dir + "/m.bin --out=" + dir + "/s.bin --ids=" +
            dir + "/ids.txt --batch_size=2 --block_size=8 --steps=3");
    REQUIRE(r.status == 0);
    CHECK(r.output.find("steps: ") != std::string::npos);
    const LlmcState s = LlmcState::load(dir + "/s.bin", c, 50304);
    CHECK(s.x[1] == 7919);
    r = run(bin("llmc") + " loss --matmul=openblas --model=" + dir + "/m.bin --ids=" + dir +
            "/ids.txt --batch_size=2 --block_size=8 --batches=1");
    REQUIRE(r.status == 0);
    // Batch 0 of `loss` is the debug state's batch: the same loss, to float rounding (the two sum the
    // rows' losses in their own order, so the sixth decimal printed may differ).
    const std::string key = "mean loss ";
    const size_t at = r.output.find(key);
    REQUIRE(at != std::string::npos);
    CHECK(std::stod(r.output.substr(at + key.size())) == Approx(s.loss).epsilon(1e-6));

    // Bad files and values: one line, exit 1, nothing written.
    const std::string bytes = read_bytes(dir + "/m.bin");
    write_file(dir + "/short.bin", bytes.substr(0, bytes.size() - 8));
    write_file(dir + "/magic.bin", with_int(bytes, 0, 7));
    write_file(dir + "/version.bin", with_int(bytes, 1, 2));
    const std::string out = " --out=" + dir + "/out.x";
    for (const auto& [args, phrase] : std::vector<std::pair<std::string, std::string>>{
             {"import --model=" + dir + "/short.bin" + out, "but the file has"},
             {"import --model=" + dir + "/magic.bin" + out, "not an llm.c model file"},
             {"import --model=" + dir + "/version.bin" + out, "version 2"},
             {"import --model=" + dir + "/none.bin" + out, "cannot open"},
             {"debug-state --model=" + dir + "/short.bin" + out, "but the file has"},
             {"debug-state --model=" + dir + "/m.bin --block_size=9" + out, "longer than the model's maxT = 8"},
             {"export --preset=gpt2 --n_layer=1 --n_head=2 --n_embd=8" + out, "tanh"},
             {"export --ckpt=" + dir + "/m.bin" + out, "safetensors"},
             {"loss --block_size=8 --model=" + dir + "/m.bin --ids=" + dir + "/m.bin", "not a list of token ids"},
             {"debug-state --matmul=gpu --model=" + dir + "/m.bin" + out, "--matmul"},
             {"loss --matmul=tpu --model=" + dir + "/m.bin --ids=" + dir + "/ids.txt", "--matmul"},
             {"loss --block_size=8 --batch_size=2 --model=" + dir + "/m.bin --ids=" + dir + "/ids.txt --batches=5",
              "need"}}) {
        r = run(bin("llmc") + " " + args);
        expect_error(r, phrase);
        CHECK(r.status == 1);
        CHECK(r.output.find('\n', r.output.find("error: ")) + 1 == r.output.size());
        CHECK(!fs::exists(dir + "/out.x"));
    }
}

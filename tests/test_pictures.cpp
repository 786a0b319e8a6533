// The pictures' data: build/activations writes a checkpoint's attention, logits, causality
// and residual norms for a prompt as JSON, and they are the model's own numbers; then
// tools/plot.py (`make plot`) turns a run into its PNGs.
#include "tests/catch.h"
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "lib/checkpoint/checkpoint.h"
#include "tests/app_runner.h"
#include "lib/model/probe.h"
#include "lib/text/char_tokenizer.h"

using namespace hg;
using namespace hg::test;
namespace fs = std::filesystem;

namespace {

// A trained tiny run (2 layers, 2 heads, 12 steps) in a temporary out_dir.
struct TinyRun {
    fs::path dir;
    TinyRun() {
        dir = fs::temp_directory_path() /
              ("handgrad-pictures-" + std::to_string(getpid()) + "-" + std::to_string(rand()));
        fs::create_directories(dir);
        std::string text;
        for (int i = 0; i < 80; i++)
            text += "to be or not to be, that is the question; whether 'tis nobler in the mind.\n";
        std::ofstream(dir / "data.txt", std::ios::binary) << text;
        const Run r = run(bin("train") + " --n_layer=2 --n_head=2 --n_embd=16 --block_size=16 --batch_size=4 "
                          "--eval_iters=2 --threads=1 --warmup_iters=2 --max_iters=12 --lr_decay_iters=12 "
                          "--eval_interval=6 --log_interval=3 --data=" + (dir / "data.txt").string() +
                          " --out_dir=" + dir.string());
        INFO(r.output);
        REQUIRE(r.status == 0);
    }
    ~TinyRun() { fs::remove_all(dir); }
    std::string ckpt() const { return (dir / "ckpt.safetensors").string(); }
};

}  // namespace

TEST_CASE("activations writes the model's own attention, logits, causality and residual norms", "[apps][pictures]") {
    TinyRun tiny;
    const std::string prompt = "to be or not";  // T = 12 ≤ block_size 16
    const fs::path out = tiny.dir / "acts.json";
    // The library below runs on OpenBLAS; the app on the same backend, so that the norms agree beyond rounding.
    const Run r = run(bin("activations") + " --ckpt=" + tiny.ckpt() + " --prompt='" + prompt +
                      "' --change_to=q --out=" + out.string() + " --matmul=openblas");
    INFO(r.output);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(read_bytes(out));
    const int T = int(prompt.size()), L = 2, NH = 2;

    // The same forward pass in the library, to compare against.
    const Checkpoint ck = Checkpoint::load(tiny.ckpt());
    const int V = ck.config.vocab_size;
    GPT<float> m;  // the attention that keeps the probabilities compared below
    gpt_build<float>(m, ck.config, 1, T, nullptr, ActivationPlan{AttentionKind::Materialized});
    ck.read_weights(m);
    std::vector<int> ids = Tokenizer::from_vocab(ck.vocab).encode(prompt);
    gpt_forward(m, ids.data(), nullptr, 1, T);
    CHECK(j["ids"].get<std::vector<int>>() == ids);
    CHECK(j["tokens"].size() == size_t(T));
    CHECK(j["vocab"].size() == size_t(V));

    const auto& att = j["attention"];  // (L, NH, T, T)
    REQUIRE(att.size() == size_t(L));
    for (int l = 0; l < L; l++) {
        REQUIRE(att[l].size() == size_t(NH));
        for (int h = 0; h < NH; h++) {
            REQUIRE(att[l][h].size() == size_t(T));
            for (int t = 0; t < T; t++) {
                const auto row = att[l][h][t].get<std::vector<double>>();
                REQUIRE(row.size() == size_t(T));
                double sum = 0;
                for (int s = 0; s < T; s++) {
                    sum += row[s];
                    if (s > t) CHECK(row[s] == 0.0);  // causal: no weight on the future
                    CHECK(row[s] == Approx(m.acts.h[l].att[(size_t(h) * T + t) * T + s]).margin(1e-6));
                }
                CHECK(sum == Approx(1.0).margin(1e-5));
            }
        }
    }
    const auto& logits = j["logits"];  // (T, V)
    REQUIRE(logits.size() == size_t(T));
    for (int t = 0; t < T; t++)
        for (int v = 0; v < V; v++) CHECK(logits[t][v].get<double>() == Approx(m.acts.logits[t * V + v]).margin(1e-5));

    // Changing the last token moves the last row of the logits and no other, exactly.
    CHECK(j["changed"]["to"] == "q");
    CHECK(j["changed"]["from"] == "t");
    const auto& delta = j["delta_logits"];
    double last_max = 0;
    for (int t = 0; t < T; t++)
        for (int v = 0; v < V; v++) {
            const double d = delta[t][v].get<double>();
            if (t < T - 1) CHECK(d == 0.0);
            else last_max = std::max(last_max, d);
        }
    CHECK(last_max > 0);

    // ‖H⁽ˡ⁾‖ as loaded equals the library's; scaling the branches leaves the embeddings alone.
    const std::vector<double> plain = residual_norms(m);
    const auto jp = j["residual_norms"]["plain"].get<std::vector<double>>();
    const auto js = j["residual_norms"]["scaled"].get<std::vector<double>>();
    REQUIRE(jp.size() == size_t(L + 1));
    REQUIRE(js.size() == size_t(L + 1));
    for (int l = 0; l <= L; l++) CHECK(jp[l] == Approx(plain[l]).epsilon(1e-12));
    CHECK(js[0] == jp[0]);
    CHECK(js[L] != jp[L]);
    CHECK(j["residual_norms"]["factor"].get<double>() == Approx(0.5));  // 1/√(2·2)

    SECTION("--fresh_init draws new weights with the checkpoint's config") {
        const Run f = run(bin("activations") + " --ckpt=" + tiny.ckpt() + " --prompt='" + prompt +
                          "' --fresh_init=lesson14 --seed=3");
        INFO(f.output);
        REQUIRE(f.status == 0);
        const auto jf = nlohmann::json::parse(f.output);
        CHECK(jf["config"]["init"] == "lesson14");
        CHECK(jf["logits"] != j["logits"]);
        CHECK(jf["residual_norms"]["plain"].size() == size_t(L + 1));
    }
    SECTION("--crop keeps the last block_size characters of a longer prompt, as sampling does") {
        const std::string longer = "to be or not to be, that is the question";  // 40 characters, block_size 16
        const Run f = run(bin("activations") + " --ckpt=" + tiny.ckpt() + " --prompt='" + longer + "' --crop");
        INFO(f.output);
        REQUIRE(f.status == 0);
        const auto jc = nlohmann::json::parse(f.output);
        CHECK(jc["prompt"] == longer.substr(longer.size() - 16));
        const std::vector<int> all = Tokenizer::from_vocab(ck.vocab).encode(longer);
        CHECK(jc["ids"].get<std::vector<int>>() == std::vector<int>(all.end() - 16, all.end()));
        CHECK(jc["attention"][0][0].size() == 16);
        // A prompt that fits is left as it is.
        const Run same = run(bin("activations") + " --ckpt=" + tiny.ckpt() + " --prompt='" + prompt + "' --crop");
        REQUIRE(same.status == 0);
        CHECK(nlohmann::json::parse(same.output)["ids"].get<std::vector<int>>() == ids);
    }
    SECTION("bad prompts are refused with one clear line") {
        const std::string base = bin("activations") + " --ckpt=" + tiny.ckpt();
        for (const auto& [args, phrase] : std::vector<std::pair<std::string, std::string>>{
                 {" --prompt=Zebra", "Z"},
                 {" --prompt=" + std::string(17, 't'), "block_size"},
                 {" --prompt=tot --change_to=t", "already"},
                 {" --prompt=tot --change_to=to", "one character"},
                 {" --prompt=tot --fresh_init=xavier", "xavier"}}) {
            const Run e = run(base + args);
            INFO(args << "\n" << e.output);
            CHECK(e.status != 0);
            CHECK(e.status < 128);
            CHECK(e.output.find("error: ") != std::string::npos);
            CHECK(e.output.find(phrase) != std::string::npos);
        }
    }
}

TEST_CASE("tools/plot.py writes every picture of a run", "[apps][pictures][plot]") {
    if (!fs::exists("tools/plot.py") || run("/usr/bin/python3 -c 'import matplotlib, numpy'").status != 0) {
        WARN("skipped: needs tools/plot.py (run from the repository) and /usr/bin/python3 with matplotlib");
        return;
    }
    TinyRun tiny;
    const Run r = run("HANDGRAD_BIN=" + fs::path(bin("")).string() + " /usr/bin/python3 tools/plot.py " +
                      tiny.dir.string() + " --prompt='to be or not'");
    INFO(r.output);
    REQUIRE(r.status == 0);
    for (const char* name : {"loss.png", "parameters.png", "attention.png", "logits.png", "residual.png"}) {
        INFO(name);
        const std::string bytes = read_bytes(tiny.dir / name);
        REQUIRE(bytes.size() > 1000);
        CHECK(bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);
    }
    // A prompt longer than the model's context (block_size 16) is cropped to its last 16
    // characters, as sampling crops, not refused.
    const Run longer = run("HANDGRAD_BIN=" + fs::path(bin("")).string() + " /usr/bin/python3 tools/plot.py " +
                           tiny.dir.string() + " --prompt='to be or not to be, that is the question'");
    INFO(longer.output);
    REQUIRE(longer.status == 0);
    CHECK(nlohmann::json::parse(read_bytes(tiny.dir / "activations.json"))["prompt"] == " is the question");
    const Run missing = run("/usr/bin/python3 tools/plot.py " + (tiny.dir / "nowhere").string());
    CHECK(missing.status != 0);
    CHECK(missing.output.find("error: ") != std::string::npos);
}

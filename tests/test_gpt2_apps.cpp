// test_gpt2_apps.cpp — --tokenizer=char|gpt2 through train, eval and sample; the tokenizer a
// checkpoint records and the mismatches it refuses; bits per character; --init_from=PATH
// (fine-tuning: weights only, the position table cropped); build/logits; one "error:" line for
// each kind of bad input.
#include "tests/catch.h"

#include <cmath>
#include <cstring>
#include <string>

#include "lib/checkpoint/checkpoint.h"
#include "lib/kernels/matmul.h"
#include "lib/text/char_tokenizer.h"
#include "lib/train/evaluate.h"
#include "lib/train/trainer.h"
#include "tests/app_runner.h"
#include "tests/bpe_files.h"

using namespace hg;
using namespace hg::test;

namespace {

std::string romeo_text() {
    return corpus(60,
                  "ROMEO: But soft, what light through yonder window breaks? It's the east, and Juliet's the sun.\n");
}

// Smaller still, so each run takes about a second even with GPT-2's 50,257 rows.
const std::string kTinyRun =
    kTiny + " --batch_size=2 --eval_iters=1 --warmup_iters=1 --max_iters=4 --eval_interval=4 --log_interval=2";

}  // namespace

TEST_CASE("train --tokenizer=gpt2 records the tokenizer; eval and sample use it and refuse another", "[gpt2][apps]") {
    if (gpt2_dir().empty()) return;
    TempDir tmp("handgrad-gpt2");
    const std::string data = write_file(tmp.path / "data.txt", romeo_text()), out = (tmp.path / "out").string();
    const std::string dir = " --gpt2_dir=" + gpt2_dir(), ckpt = out + "/ckpt.safetensors";
    const Run train =
        run(bin("train") + kTinyRun + " --tokenizer=gpt2" + dir + " --data=" + data + " --out_dir=" + out);
    INFO(train.output);
    REQUIRE(train.status == 0);
    CHECK(train.output.find("V=50257") != std::string::npos);
    CHECK(train.output.find("tokens of the gpt2 tokenizer") != std::string::npos);
    const Checkpoint ck = Checkpoint::load(ckpt);
    CHECK(ck.tokenizer == "gpt2");
    CHECK(ck.vocab.empty());
    CHECK(ck.config.vocab_size == kGpt2VocabSize);

    // eval: nats per token, and bits per character over the characters the targets spell
    const Run eval = run(bin("eval") + " --ckpt=" + ckpt + dir + " --text=" + data + " --json");
    INFO(eval.output);
    REQUIRE(eval.status == 0);
    const auto j = nlohmann::json::parse(eval.output);
    const double loss = j["loss"], bpc = j["bits_per_char"];
    const double tokens = j["tokens"], chars = j["characters"];
    CHECK(chars > 2.5 * tokens);  // English takes about 4 characters a GPT-2 token
    CHECK(bpc == Approx(loss * tokens / chars / std::log(2.0)).epsilon(1e-9));
    const Run text = run(bin("eval") + " --ckpt=" + ckpt + dir + " --text=" + data);
    CHECK(text.output.find("nats/token") != std::string::npos);
    CHECK(text.output.find("gpt2 tokenizer") != std::string::npos);

    // sample: the prompt is encoded with GPT-2's BPE and the output starts with it
    const Run sample = run(bin("sample") + " --ckpt=" + ckpt + dir + " --start='ROMEO: naïve' --max_new_tokens=5");
    INFO(sample.output);
    REQUIRE(sample.status == 0);
    CHECK(sample.output.rfind("ROMEO: naïve", 0) == 0);

    // a mismatch, on every app, and on resuming
    expect_error(run(bin("eval") + " --ckpt=" + ckpt + " --tokenizer=char --text=" + data), "trained with the gpt2");
    expect_error(run(bin("sample") + " --ckpt=" + ckpt + " --tokenizer=char"), "trained with the gpt2");
    expect_error(
        run(bin("train") + kTinyRun + " --tokenizer=char --init_from=resume --data=" + data + " --out_dir=" + out),
        "trained with the gpt2");
    expect_error(run(bin("sample") + " --ckpt=" + ckpt + " --gpt2_dir=" + (tmp.path / "none").string()), "none");
}

TEST_CASE("--tokenizer: bad names, missing files, a vocab_size that is not the tokenizer's", "[gpt2][apps][errors]") {
    TempDir tmp("handgrad-gpt2");
    const std::string data = write_file(tmp.path / "data.txt", romeo_text()), out = (tmp.path / "out").string();
    const std::string base = bin("train") + kTinyRun + " --data=" + data + " --out_dir=" + out;
    expect_error(run(base + " --tokenizer=bpe"), "unknown tokenizer 'bpe'");
    expect_error(run(base + " --tokenizer=gpt2 --gpt2_dir=" + (tmp.path / "nowhere").string()), "nowhere");
    expect_error(run(base + " --tokenizer=char --vocab_size=7"), "--vocab_size=7");
    if (!gpt2_dir().empty())
        expect_error(run(base + " --tokenizer=gpt2 --gpt2_dir=" + gpt2_dir() + " --vocab_size=50304"),
                     "the gpt2 tokenizer has 50257 tokens");

    // a char checkpoint: eval and sample refuse gpt2 for it
    REQUIRE(run(base).status == 0);
    const std::string ckpt = out + "/ckpt.safetensors";
    CHECK(Checkpoint::load(ckpt).tokenizer == "char");
    expect_error(run(bin("eval") + " --ckpt=" + ckpt + " --tokenizer=gpt2 --text=" + data), "trained with the char");
    expect_error(run(bin("sample") + " --ckpt=" + ckpt + " --tokenizer=gpt2"), "trained with the char");
    expect_error(run(bin("eval") + " --ckpt=" + ckpt + " --tokenizer=bpe --text=" + data), "unknown tokenizer");

    // for characters, bits per character are nats per token / ln 2
    const auto j = nlohmann::json::parse(run(bin("eval") + " --ckpt=" + ckpt + " --text=" + data + " --json").output);
    CHECK(double(j["characters"]) == double(j["tokens"]));
    CHECK(double(j["bits_per_char"]) == Approx(double(j["loss"]) / std::log(2.0)).epsilon(1e-12));
}

TEST_CASE("a checkpoint's tokenizer metadata is validated on load", "[gpt2][errors]") {
    TempDir tmp("handgrad-gpt2");
    GPTConfig c = preset("course");
    c.vocab_size = 3, c.n_layer = 1, c.n_head = 2, c.n_embd = 8, c.block_size = 4;
    GPT<float> m;
    gpt_build(m, c, 1, 4);
    gpt_init(m, 1);
    const std::vector<std::string> vocab{"a", "b", "c"};
    const std::string path = (tmp.path / "ck.safetensors").string();
    CHECK_THROWS_WITH(save_checkpoint(path, m, vocab, {}, nullptr, nullptr, "gpt2"),
                      Catch::Contains("no vocabulary of its own"));
    CHECK_THROWS_WITH(save_checkpoint(path, m, {}, {}, nullptr, nullptr, "gpt2"), Catch::Contains("vocab_size 50257"));
    CHECK_THROWS_WITH(save_checkpoint(path, m, vocab, {}, nullptr, nullptr, "bpe"),
                      Catch::Contains("unknown tokenizer"));
    save_checkpoint(path, m, vocab, {}, nullptr, nullptr);

    // the same file with its "tokenizer" entry rewritten
    const auto rewritten = [&](const std::string& tokenizer) {
        const SafetensorsFile f = SafetensorsFile::load(path);
        SafetensorsWriter w;
        for (const std::string& name : f.names()) {
            const auto& e = f.get(name);
            w.add(name, e.dtype, std::vector<size_t>(e.shape.dims.begin(), e.shape.dims.begin() + e.shape.ndim),
                  e.data);
        }
        for (const auto& [key, value] : f.metadata()) w.set_metadata(key, value);
        w.set_metadata("tokenizer", tokenizer);
        const std::string out = (tmp.path / ("ck-" + tokenizer + ".safetensors")).string();
        w.save(out);
        return out;
    };
    CHECK_THROWS_WITH(Checkpoint::load(rewritten("gpt2")), Catch::Contains("no vocabulary of its own"));
    CHECK_THROWS_WITH(Checkpoint::load(rewritten("wordpiece")), Catch::Contains("unknown tokenizer 'wordpiece'"));
    CHECK(Checkpoint::load(rewritten("char")).tokenizer == "char");
}

TEST_CASE("count_characters: code points of the decoded ids, a token's partial character included", "[gpt2]") {
    const Tokenizer chars = Tokenizer::from_text("hé!");
    const std::vector<int> ids = chars.encode("!héh");
    CHECK(count_characters(chars, ids.data(), ids.size()) == 4);
    if (gpt2_dir().empty()) return;
    const std::string text = "naïve 日本語 🎉";
    const std::vector<int> bpe = gpt2().encode(text);
    CHECK(count_characters(gpt2(), bpe.data(), bpe.size()) == 11);
    CHECK(bpe.size() > 5);  // several of them hold part of a character
}

TEST_CASE("Trainer::start_from: a checkpoint's weights, the position table cropped, fresh optimizer state",
          "[gpt2][train]") {
    TempDir tmp("handgrad-gpt2");
    const Tokenizer tok = Tokenizer::from_text(romeo_text());
    const std::vector<int> ids = tok.encode(romeo_text());
    GPTConfig c = preset("course");
    c.vocab_size = tok.size(), c.n_layer = 1, c.n_head = 2, c.n_embd = 16, c.block_size = 16;
    TrainConfig tc;
    tc.batch_size = 2, tc.max_iters = 3, tc.eval_iters = 1;
    Trainer base;
    base.start(c, tc, tok.vocab, ids, ids);
    for (int i = 0; i < 3; i++) base.step();
    const std::string path = (tmp.path / "base.safetensors").string();
    base.save(path);
    const Checkpoint ck = Checkpoint::load(path);
    REQUIRE(ck.has_optimizer);

    GPTConfig shorter = c;
    shorter.block_size = 8, shorter.dropout = 0.1f;
    Trainer tuned;
    tuned.start_from(ck, shorter, tc, ids, ids);
    CHECK(tuned.progress.iter_num == 0);
    CHECK(tuned.progress.adam_step == 0);
    CHECK(tuned.vocab == tok.vocab);
    for (size_t i = 0; i < tuned.model.num_parameters; i++) {
        CHECK(tuned.m.data()[i] == 0.0f);
        CHECK(tuned.v.data()[i] == 0.0f);
    }
    for (const TensorSpec& t : tuned.model.table) {  // every tensor, wpe's first 8 rows
        INFO(t.name);
        const float* want = base.model.params_memory.data();
        const TensorSpec& b = *std::find_if(base.model.table.begin(), base.model.table.end(),
                                            [&](const TensorSpec& s) { return s.name == t.name; });
        CHECK(std::memcmp(tuned.model.params_memory.data() + t.offset, want + b.offset,
                          t.shape.numel() * sizeof(float)) == 0);
    }
    CHECK(std::isfinite(tuned.step().loss));

    GPTConfig longer = c, wider = c;
    longer.block_size = 32, wider.n_embd = 32;
    Trainer bad;
    CHECK_THROWS_WITH(bad.start_from(ck, longer, tc, ids, ids), Catch::Contains("longer than the checkpoint's 16"));
    CHECK_THROWS_WITH(bad.start_from(ck, wider, tc, ids, ids), Catch::Contains("only block_size and dropout"));
}

TEST_CASE("train --init_from=PATH fine-tunes a checkpoint; bad paths and shape flags are refused", "[gpt2][apps]") {
    TempDir tmp("handgrad-gpt2");
    const std::string data = write_file(tmp.path / "data.txt", romeo_text()), base = (tmp.path / "base").string();
    REQUIRE(run(bin("train") + kTinyRun + " --data=" + data + " --out_dir=" + base).status == 0);
    const std::string from = base + "/ckpt.safetensors", out = (tmp.path / "tuned").string();
    const std::string tune = bin("train") + " --batch_size=2 --eval_iters=1 --threads=1 --max_iters=2 --eval_interval=2"
                             " --data=" + data + " --out_dir=" + out;
    const Run r = run(tune + " --init_from=" + from + " --block_size=8 --learning_rate=3e-5 --decay_lr=false");
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK(r.output.find("starting from the weights of " + from) != std::string::npos);
    CHECK(r.output.find("block_size=8") != std::string::npos);
    const Checkpoint ck = Checkpoint::load(out + "/ckpt.safetensors");
    CHECK(ck.progress.iter_num == 2);
    CHECK(ck.progress.adam_step == 2);  // the base's 4 steps are not carried over
    CHECK(ck.config.block_size == 8);
    CHECK(ck.config.n_embd == 16);  // the checkpoint's, not the course preset's 128

    expect_error(run(tune + " --init_from=" + (tmp.path / "nothing.safetensors").string()), "no such checkpoint file");
    expect_error(run(tune + " --init_from=gpt2"), "tools/convert.py from-hf");
    expect_error(run(tune + " --init_from=" + data), "data.txt");  // a file, but not a checkpoint
    expect_error(run(tune + " --init_from=" + from + " --n_layer=2"), "the model is the checkpoint's");
    expect_error(run(tune + " --init_from=" + from + " --block_size=64"), "longer than the checkpoint's");
    expect_error(run(tune + " --init_from=" + from + " --tokenizer=gpt2"), "trained with the char");
}

TEST_CASE("logits: one forward pass's logits as safetensors; bad ids are refused", "[gpt2][apps][errors]") {
    TempDir tmp("handgrad-gpt2");
    GPTConfig c = preset("course");
    c.vocab_size = 5, c.n_layer = 1, c.n_head = 2, c.n_embd = 8, c.block_size = 4;
    GPT<float> m;
    gpt_build(m, c, 1, 3);
    gpt_init(m, 3);
    const std::string ckpt = (tmp.path / "ck.safetensors").string(), out = (tmp.path / "logits.safetensors").string();
    save_checkpoint(ckpt, m, {"a", "b", "c", "d", "e"}, {}, nullptr, nullptr);
    const auto logits = [&](const std::string& ids) {
        // the backend of the products made here (compared bit for bit)
        return run(bin("logits") + " --matmul=" + to_string(matmul_current()) + " --ckpt=" + ckpt + " --out=" + out +
                   " < " + write_file(tmp.path / "ids", ids));
    };
    const Run r = logits("4 0\n2");
    INFO(r.output);
    REQUIRE(r.status == 0);
    const int ids[] = {4, 0, 2};
    gpt_forward(m, ids, nullptr, 1, 3);
    const SafetensorsFile f = SafetensorsFile::load(out);
    std::vector<float> got(15);
    f.read_f32("logits", Shape{3, 5}, got.data());
    for (int i = 0; i < 15; i++) CHECK(got[i] == m.acts.logits[i]);

    expect_error(logits(""), "give 1 to block_size = 4 token ids");
    expect_error(logits("1 2 3 4 0"), "give 1 to block_size = 4 token ids");
    expect_error(logits("1 5"), "token id 5 at position 1 is outside the vocabulary [0, 5)");
    expect_error(logits("1 -1"), "token id -1");
    expect_error(logits("1 x"), "'x' at position 1 is not a token id");
    expect_error(logits("99999999999"), "outside the vocabulary");
    expect_error(run(bin("logits") + " --ckpt=" + (tmp.path / "none").string() + " --out=" + out + " < /dev/null"),
                 "none");
}

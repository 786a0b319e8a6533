// test_prepare_app.cpp — text to a trained model in two commands: build/prepare writes token
// files, build/train and build/eval read them from disk, exactly as they read the text (the same
// tensors, the same losses); resuming reads the same batches; nanoGPT's directories both ways;
// every flawed token file ends train with one line, exit 1, no checkpoint; and so does a shard
// cut short while a run reads it.
#include "tests/catch.h"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "lib/data/shards.h"
#include "tests/app_runner.h"
#include "tests/spawn.h"

using namespace hg;
using namespace hg::test;
namespace fs = std::filesystem;

namespace {

const std::string kRun = kTiny + " --batch_threads=1 --max_iters=8 --eval_interval=4 --log_interval=4";

Run prepare(const std::string& args) { return run(bin("prepare") + " --quiet --tokenizer=char " + args); }

std::string eval_line(const std::string& ckpt, const std::string& data) {
    const Run e = run(bin("eval") + " --threads=1 --json --ckpt=" + ckpt + " --data=" + data);
    INFO(e.output);
    REQUIRE(e.status == 0);
    return e.output;
}

}  // namespace

TEST_CASE("prepare then train on the directory, a glob, or nanoGPT's .bin: the run of train --data=FILE",
          "[apps][prepare][shards]") {
    TempDir tmp("handgrad-prepare");
    const std::string text = write_file(tmp.path / "in.txt", corpus());
    const std::string dir = (tmp.path / "tok").string(), nano = (tmp.path / "nano").string();
    Run p = prepare("--out_dir=" + dir + " " + text);
    INFO(p.output);
    REQUIRE(p.status == 0);
    CHECK(p.output.find("5400 train + 600 val tokens of the char") != std::string::npos);
    REQUIRE(prepare("--format=nanogpt --out_dir=" + nano + " " + text).status == 0);
    CHECK(fs::exists(nano + "/train.bin"));
    CHECK(fs::exists(nano + "/tokenizer.json"));

    const Run base = run(bin("train") + kRun + " --data=" + text + " --out_dir=" + (tmp.path / "a").string());
    REQUIRE(base.status == 0);
    const std::string a = (tmp.path / "a" / "ckpt.safetensors").string();
    int i = 0;
    for (const std::string& data : {dir, dir + "/data_*.bin", nano}) {
        INFO(data);
        const std::string out = (tmp.path / ("b" + std::to_string(i++))).string();
        const Run r = run(bin("train") + kRun + " --data=" + data + " --out_dir=" + out);
        INFO(r.output);
        REQUIRE(r.status == 0);
        CHECK(r.output.find("read from disk") != std::string::npos);
        CHECK(check_same_tensors(a, out + "/ckpt.safetensors") > 0);
        // eval scores a token set's val split as the text's
        CHECK(eval_line(out + "/ckpt.safetensors", data) == eval_line(a, text));
    }
}

TEST_CASE("train on shards resumes with the very same batches; other data is refused on resume",
          "[apps][prepare][shards][resume]") {
    TempDir tmp("handgrad-prepare-resume");
    const std::string text = write_file(tmp.path / "in.txt", corpus(120));
    const std::string dir = (tmp.path / "tok").string();
    REQUIRE(prepare("--shard_tokens=2000 --out_dir=" + dir + " " + text).status == 0);
    REQUIRE(fs::exists(dir + "/data_train_000003.bin"));  // 8,100 train tokens: 4 shards, windows across them
    const std::string common = kRun + " --data=" + dir + " --lr_decay_iters=12";
    const std::string a = (tmp.path / "a").string(), b = (tmp.path / "b").string();
    REQUIRE(run(bin("train") + common + " --max_iters=12 --out_dir=" + a).status == 0);
    check_resume_exact(bin("train") + common, a, b, 6, 12);

    const std::string other = (tmp.path / "other").string();
    REQUIRE(prepare("--out_dir=" + other + " " + write_file(tmp.path / "o.txt", corpus(100))).status == 0);
    expect_error(run(bin("train") + kRun + " --data=" + other + " --max_iters=14 --init_from=resume --out_dir=" + b),
                 "the checkpoint was trained on 8100 train and 900 val tokens");
}

TEST_CASE("prepare reads standard input with --val_chars; its flags and inputs are checked",
          "[apps][prepare][errors]") {
    TempDir tmp("handgrad-prepare-stdin");
    const std::string text = write_file(tmp.path / "in.txt", corpus());
    const std::string vocab_dir = (tmp.path / "v").string();
    REQUIRE(prepare("--out_dir=" + vocab_dir + " " + text).status == 0);
    const Run r = prepare("--val_chars=600 --vocab=" + vocab_dir + "/tokenizer.json --out_dir=" +
                          (tmp.path / "s").string() + " - < " + text);
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK(r.output.find("5400 train + 600 val tokens") != std::string::npos);

    expect_error(prepare("--out_dir=" + (tmp.path / "x").string() + " - < " + text),
                 "standard input cannot be read twice");
    expect_error(prepare("--out_dir=" + vocab_dir + " " + text), "already holds");
    expect_error(prepare("--out_dir=" + (tmp.path / "x").string() + " " + (tmp.path / "nope.txt").string()),
                 "nope.txt");
    expect_error(prepare("--format=parquet --out_dir=" + (tmp.path / "x").string() + " " + text), "--format");
    expect_error(prepare("--threads=-1 --out_dir=" + (tmp.path / "x").string() + " " + text), "--threads");
    for (const char* pieces : {"0", "-3", "4097"})
        expect_error(prepare(std::string("--batch_pieces=") + pieces + " --out_dir=" + (tmp.path / "x").string() + " " +
                             text), "--batch_pieces must be in [1, 4096]");
    expect_error(prepare("--batch_pieces=two --out_dir=" + (tmp.path / "x").string() + " " + text), "--batch_pieces");
    expect_error(run(bin("prepare") + " --tokenizer=bpe --out_dir=" + (tmp.path / "x").string() + " " + text), "bpe");
    const bool nothing = !fs::exists(tmp.path / "x") || fs::is_empty(tmp.path / "x");
    CHECK(nothing);
}

TEST_CASE("train refuses each flawed token set in one line, exit 1, writing nothing", "[apps][shards][errors]") {
    TempDir tmp("handgrad-bad-shards");
    const std::string text = write_file(tmp.path / "in.txt", corpus());
    const std::string good = (tmp.path / "good").string();
    REQUIRE(prepare("--out_dir=" + good + " " + text).status == 0);
    const std::string train_shard = read_bytes(good + "/data_train_000000.bin");
    // A copy of the good set with its train shard replaced by `bytes`.
    auto variant = [&](const std::string& name, const std::string& bytes) {
        const fs::path d = tmp.path / name;
        fs::create_directories(d);
        fs::copy(good, d, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
        write_file(d / "data_train_000000.bin", bytes);
        return d.string();
    };
    auto with_int = [&](size_t field, int32_t v) {
        std::string b = train_shard;
        std::memcpy(&b[4 * field], &v, 4);
        return b;
    };
    std::string high = train_shard;
    high[kShardHeaderBytes + 2 * 10] = char(22);  // the corpus has 22 distinct characters: ids 0 to 21
    fs::create_directories(tmp.path / "empty");
    fs::create_directories(tmp.path / "mixed" / "g");
    fs::copy(good, tmp.path / "mixed" / "c");
    fs::copy_file(good + "/data_val_000000.bin", tmp.path / "mixed" / "g" / "data_val_000000.bin");
    fs::copy_file(good + "/data_train_000000.bin", tmp.path / "mixed" / "g" / "data_train_000001.bin");
    const std::vector<uint8_t> h10 = shard_header(10);
    const std::string header10(h10.begin(), h10.end());
    struct Case {
        std::string data, phrase;
    };
    const std::vector<Case> cases = {
        {variant("truncated", train_shard.substr(0, train_shard.size() - 10)), "(truncated?)"},
        {variant("cut-header", train_shard.substr(0, 500)), "1024-byte header"},
        {variant("magic", with_int(0, 1234)), "magic (header int 0) is 1234"},
        {variant("version", with_int(1, 2)), "version (header int 1) is 2"},
        {variant("high-id", high), "position 10 is 22, outside the tokenizer's 22 ids"},
        {variant("short", header10 + train_shard.substr(kShardHeaderBytes, 20)),
         "10 tokens; block_size 16 needs at least 17"},
        {(tmp.path / "empty").string(), "holds no token files"},
        {(tmp.path / "mixed" / "*" / "*.bin").string(), "mixes tokenizers"},
        {(tmp.path / "nothing-*.bin").string(), "no file matches"},
    };
    for (const Case& c : cases) {
        INFO(c.data);
        const std::string out = (tmp.path / "out").string();
        const Run r = run(bin("train") + kRun + " --data=" + c.data + " --out_dir=" + out);
        expect_error(r, c.phrase);
        CHECK(r.status == 1);
        CHECK(r.output.find('\n', r.output.find("error: ")) + 1 == r.output.size());  // one line, the last
        CHECK(!fs::exists(out + "/ckpt.safetensors"));
    }
    // the tokenizer a run asks for must be the data's
    expect_error(
        run(bin("train") + kRun + " --tokenizer=gpt2 --data=" + good + " --out_dir=" + (tmp.path / "o").string()),
        "holds char (22 tokens) ids");
}

TEST_CASE("a shard cut short while train reads it ends the run with one error line, exit 1, no signal",
          "[apps][shards][errors]") {
    TempDir tmp("handgrad-cut-shard");
    const std::string text = write_file(tmp.path / "in.txt", corpus(400));
    const std::string dir = (tmp.path / "data").string(), shard = dir + "/data_train_000000.bin";
    REQUIRE(prepare("--out_dir=" + dir + " " + text).status == 0);
    const std::string out = (tmp.path / "out").string();
    const Spawned s = spawn(bin("train") + kTiny + " --batch_threads=1 --max_iters=1000000 --eval_interval=1000000 "
                            "--log_interval=1 --data=" + dir + " --out_dir=" + out, (tmp.path / "log").string());
    const bool training = wait_for_output(s, "\niter 2:");
    const uintmax_t was = fs::file_size(shard);
    fs::resize_file(shard, kShardHeaderBytes + 64);  // what a copy over it, or a disk that filled, leaves
    const int status = wait_exit(s);
    const std::string log = read_bytes(s.log);
    INFO(log);
    REQUIRE(training);
    CHECK(status == 1);  // not 128 + SIGBUS
    expect_error(Run{status, log}, fmt::format("{}: the file is {} bytes now, {} when it was opened", shard,
                                               kShardHeaderBytes + 64, was));
    CHECK(log.find('\n', log.find("error: ")) + 1 == log.size());  // one line, the last
}

TEST_CASE("nanoGPT's char-level directory both ways: meta.pkl from tokenizer.json and back; without either "
          "the directory is refused", "[apps][prepare][nanogpt]") {
    TempDir tmp("handgrad-nanogpt");
    const std::string text = write_file(tmp.path / "in.txt", corpus());
    const std::string nano = (tmp.path / "nano").string();
    REQUIRE(prepare("--format=nanogpt --out_dir=" + nano + " " + text).status == 0);
    const DataTokenizer prepared = read_data_tokenizer(nano);
    const Run to_pkl = run("python3 tools/nanogpt_meta.py --to-pkl " + nano);
    INFO(to_pkl.output);
    REQUIRE(to_pkl.status == 0);
    // what nanoGPT's sample.py reads: itos and stoi, the corpus's 22 characters in code-point order
    const Run check = run("python3 -c \"import pickle; m = pickle.load(open('" + nano +
                          "/meta.pkl', 'rb')); print(m['vocab_size'], repr(''.join(m['itos'][i] for i in range(22))), "
                          "m['stoi']['a'])\"");
    CHECK(check.output == "22 \"\\n ',.;abdehilmnoqrstuw\" 6\n");
    fs::remove(nano + "/tokenizer.json");
    const std::string out = (tmp.path / "o").string();
    expect_error(run(bin("train") + kRun + " --data=" + nano + " --out_dir=" + out), "tools/nanogpt_meta.py");
    CHECK(!fs::exists(out + "/ckpt.safetensors"));
    REQUIRE(run("python3 tools/nanogpt_meta.py " + nano).status == 0);
    CHECK(read_data_tokenizer(nano) == prepared);  // the same vocabulary, through nanoGPT's meta.pkl
    const Run r = run(bin("train") + kRun + " --data=" + nano + " --out_dir=" + out);
    INFO(r.output);
    CHECK(r.status == 0);
}

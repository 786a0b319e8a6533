// The command-line apps end to end: bad input gets one clear "error:" line and a non-zero exit
// (never a crash or a hang), Ctrl-C saves, a NaN loss keeps the last good checkpoint, and
// resuming through the app is exact.
#include "tests/catch.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "lib/checkpoint/checkpoint.h"
#include "tests/app_runner.h"

using namespace hg;
using namespace hg::test;
namespace fs = std::filesystem;

TEST_CASE("train rejects bad flags, bad data and bad configs with one clear line", "[apps][errors][muon]") {
    TempDir tmp("handgrad-apps");
    const std::string data = write_file(tmp.path / "data.txt", corpus());
    const std::string base = bin("train") + kTiny + " --out_dir=" + (tmp.path / "out").string();
    expect_error(run(base + " --data=" + data + " --n_head=3"), "divisible by n_head");
    expect_error(run(base + " --data=" + data + " --dropout=1.5"), "dropout");
    expect_error(run(base + " --data=" + data + " --learning_rate=-1"), "learning_rate");
    expect_error(run(base + " --data=" + data + " --batch_size=0"), "batch_size");
    expect_error(run(base + " --data=" + data + " --init_from=gpt2"), "init_from");
    expect_error(run(base + " --data=" + data + " --no_such_flag=1"), "no_such_flag");
    expect_error(run(base + " --data=" + data + " --n_layer=two"), "n_layer");
    expect_error(run(base + " --data=" + data + " --optimizer=sgd"), "adamw or muon");
    expect_error(run(base + " --data=" + data + " --optimizer=muon --muon_momentum=1"), "muon_momentum");
    expect_error(run(base + " --data=" + data + " --optimizer=muon --muon_lr=-0.1"), "muon_lr");
    expect_error(run(base + " --data=" + data + " --muon_momentum_warmup=-5"), "muon_momentum_warmup");
    expect_error(run(base + " --data=" + (tmp.path / "missing.txt").string()), "missing.txt");
    expect_error(run(base + " --data=" + write_file(tmp.path / "empty.txt", "")), "empty");
    expect_error(run(base + " --data=" + write_file(tmp.path / "short.txt", "abcdefghij")), "block_size");
    expect_error(run(base + " --data=" + write_file(tmp.path / "bad.txt", "ab\xff\xfe cd")), "UTF-8");
    expect_error(run(base + " --data=" + data + " --init_from=resume"), "ckpt.safetensors");
    // one list of presets: the error names every one, and so does the flags' help
    const Run unknown = run(base + " --data=" + data + " --preset=gpt3"), help = run(bin("inspect") + " --help");
    expect_error(unknown, "unknown preset");
    for (const std::string& name : preset_names()) {
        CHECK(unknown.output.find(name) != std::string::npos);
        CHECK(help.output.find(name) != std::string::npos);
    }
}

TEST_CASE("train, eval and sample work end to end; resuming through the app is exact", "[apps][resume]") {
    TempDir tmp("handgrad-apps");
    const std::string data = write_file(tmp.path / "data.txt", corpus());
    const std::string a = (tmp.path / "a").string(), b = (tmp.path / "b").string();
    const std::string common = kTiny + " --data=" + data + " --lr_decay_iters=12 --eval_interval=6 --log_interval=3";
    Run straight = run(bin("train") + common + " --max_iters=12 --out_dir=" + a);
    INFO(straight.output);
    REQUIRE(straight.status == 0);
    CHECK(straight.output.find("val loss") != std::string::npos);
    CHECK(fs::exists(a + "/log.csv"));
    const Run resumed = check_resume_exact(bin("train") + common, a, b, 6, 12);
    CHECK(resumed.output.find("resuming") != std::string::npos);
    CHECK(Checkpoint::load(a + "/ckpt.safetensors").progress.iter_num == 12);
    CHECK(Checkpoint::load(b + "/ckpt.safetensors").progress.iter_num == 12);

    SECTION("eval prints the loss as JSON") {
        Run e = run(bin("eval") + " --threads=1 --json --ckpt=" + a + "/ckpt.safetensors --text=" + data);
        INFO(e.output);
        CHECK(e.status == 0);
        CHECK(e.output.find("\"bits_per_char\"") != std::string::npos);
        CHECK(e.output.find("\"tokens\"") != std::string::npos);
    }
    SECTION("sample continues a prompt; a character outside the vocabulary is refused") {
        Run s = run(bin("sample") + " --out_dir=" + a + " --start=to --max_new_tokens=20 --seed=1");
        INFO(s.output);
        CHECK(s.status == 0);
        CHECK(s.output.rfind("to", 0) == 0);
        Run greedy1 = run(bin("sample") + " --out_dir=" + a + " --start=to --max_new_tokens=20 --temperature=0");
        Run greedy2 =
            run(bin("sample") + " --out_dir=" + a + " --start=to --max_new_tokens=20 --temperature=0 --seed=7");
        CHECK(greedy1.output == greedy2.output);
        expect_error(run(bin("sample") + " --out_dir=" + a + " --start=Zebra"), "Z");
        // longer than block_size: the context is cropped, not overrun
        CHECK(run(bin("sample") + " --out_dir=" + a + " --max_new_tokens=40 --start=" + std::string(30, 't')).status ==
              0);
    }
    SECTION("truncated or foreign checkpoints are refused, never crash") {
        const std::string ck = a + "/ckpt.safetensors";
        const std::string bytes = read_bytes(ck);
        for (size_t cut : {size_t(0), size_t(4), size_t(100), bytes.size() / 2, bytes.size() - 1}) {
            write_file(tmp.path / "cut.safetensors", bytes.substr(0, cut));
            expect_error(run(bin("sample") + " --ckpt=" + (tmp.path / "cut.safetensors").string()), "cut.safetensors");
        }
        expect_error(run(bin("eval") + " --text=" + data + " --ckpt=" + data), "data.txt");
        expect_error(run(bin("sample") + " --ckpt=" + (tmp.path / "nope.safetensors").string()), "nope.safetensors");
    }
}

TEST_CASE("sample with and without the KV cache prints the same text; --kv_cache takes 0 or 1",
          "[apps][kvcache][sample]") {
    TempDir tmp("handgrad-apps");
    const std::string data = write_file(tmp.path / "data.txt", corpus());
    const std::string a = (tmp.path / "a").string();
    REQUIRE(run(bin("train") + kTiny + " --data=" + data + " --max_iters=6 --eval_interval=6 --out_dir=" + a).status ==
            0);
    // 40 tokens after a 3-character prompt: past block_size 16, where the context slides
    const std::string cmd = bin("sample") + " --out_dir=" + a + " --start=to, --max_new_tokens=40 --num_samples=3";
    for (const std::string& how : {std::string(" --temperature=0"), std::string(" --top_k=5 --seed=3")}) {
        Run cached = run(cmd + how), full = run(cmd + how + " --kv_cache=0");
        INFO(cached.output);
        CHECK(cached.status == 0);
        CHECK(full.status == 0);
        CHECK(cached.output == full.output);
        CHECK(cached.output.size() > 3 * (40 + 3));
    }
    expect_error(run(bin("sample") + " --out_dir=" + a + " --kv_cache=2"), "--kv_cache must be 0 or 1");
    expect_error(run(bin("sample") + " --out_dir=" + a + " --kv_cache=-1"), "--kv_cache");
    expect_error(run(bin("sample") + " --out_dir=" + a + " --kv_cache=yes"), "--kv_cache");
    expect_error(run(bin("bench_sample") + " --preset=course --kv_cache=3"), "--kv_cache must be 0 or 1");
    expect_error(run(bin("bench_sample") + " --preset=course --max_new_tokens=0"), "--max_new_tokens");
}

TEST_CASE("train --optimizer=muon prints its groups and resumes exactly through the app", "[apps][muon][resume]") {
    TempDir tmp("handgrad-apps");
    const std::string data = write_file(tmp.path / "data.txt", corpus());
    const std::string a = (tmp.path / "a").string(), b = (tmp.path / "b").string();
    const std::string common = kTiny + " --data=" + data + " --optimizer=muon --muon_lr=0.01 --muon_momentum_warmup=4" +
                               " --lr_decay_iters=8 --eval_interval=4 --log_interval=4";
    Run straight = run(bin("train") + common + " --max_iters=8 --out_dir=" + a);
    INFO(straight.output);
    REQUIRE(straight.status == 0);
    // 1 layer: c_attn (48, 16), c_proj (16, 16), c_fc (64, 16), c_proj (16, 64) = 3072 numbers
    CHECK(straight.output.find("optimizer: muon") != std::string::npos);
    CHECK(straight.output.find("muon:  4 tensors, 3072 parameters") != std::string::npos);
    CHECK(straight.output.find("adamw: ") != std::string::npos);
    check_resume_exact(bin("train") + common, a, b, 4, 8);
    expect_error(run(bin("train") + kTiny + " --data=" + data + " --max_iters=9 --init_from=resume --out_dir=" + b),
                 "--optimizer=muon");
}

TEST_CASE("train --dtype=bfloat16 says so, resumes exactly, and its checkpoint resumes in float32",
          "[apps][bf16][resume]") {
    TempDir tmp("handgrad-apps");
    const std::string data = write_file(tmp.path / "data.txt", corpus());
    const std::string a = (tmp.path / "a").string(), b = (tmp.path / "b").string();
    const std::string common = kTiny + " --data=" + data + " --dtype=bfloat16 --lr_decay_iters=8 --eval_interval=4 "
                               "--log_interval=4";
    Run straight = run(bin("train") + common + " --max_iters=8 --out_dir=" + a);
    INFO(straight.output);
    REQUIRE(straight.status == 0);
    CHECK(straight.output.find("dtype: bfloat16 (products: ") != std::string::npos);
    check_resume_exact(bin("train") + common, a, b, 4, 8);
    Run as_float = run(bin("train") + kTiny + " --data=" + data + " --max_iters=10 --lr_decay_iters=8 "
                       "--eval_interval=4 --init_from=resume --out_dir=" + b);
    INFO(as_float.output);
    CHECK(as_float.status == 0);
    CHECK(as_float.output.find("dtype: float32") != std::string::npos);
}

TEST_CASE("a non-finite loss stops training and keeps the last good checkpoint", "[apps][nan]") {
    TempDir tmp("handgrad-apps");
    const std::string data = write_file(tmp.path / "data.txt", corpus());
    const std::string out = (tmp.path / "out").string();
    const std::string common = kTiny + " --data=" + data + " --out_dir=" + out;
    REQUIRE(run(bin("train") + common + " --max_iters=4 --eval_interval=2").status == 0);
    const std::string before = read_bytes(out + "/ckpt.safetensors");
    // An absurd learning rate sends the weights to ±inf within a few steps: the loss becomes NaN.
    Run r =
        run(bin("train") + common +
            " --init_from=resume --max_iters=40 --eval_interval=2 --grad_clip=0 "
            "--learning_rate=1e30 --warmup_iters=0 --lr_decay_iters=40 --min_lr=1e30 --always_save_checkpoint=false");
    expect_error(r, "loss is");
    CHECK(r.output.find("untouched") != std::string::npos);
    // No better val loss is possible from exploding weights, so nothing overwrote the file.
    CHECK(read_bytes(out + "/ckpt.safetensors") == before);
    CHECK_NOTHROW(Checkpoint::load(out + "/ckpt.safetensors"));
}

TEST_CASE("Ctrl-C finishes the step, saves a loadable checkpoint, and exits cleanly", "[apps][sigint]") {
    TempDir tmp("handgrad-apps");
    const std::string data = write_file(tmp.path / "data.txt", corpus());
    const std::string out = (tmp.path / "out").string();
    // A run far too long to finish; SIGINT after 2 s (the handler is installed before training).
    Run r = run("timeout --preserve-status -s INT 2 " + bin("train") + kTiny + " --data=" + data + " --out_dir=" + out +
                " --max_iters=100000000 --eval_interval=100000000");
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(r.output.find("interrupted by SIGINT: saved checkpoint") != std::string::npos);
    Checkpoint ck = Checkpoint::load(out + "/ckpt.safetensors");
    CHECK(ck.progress.iter_num > 0);
}

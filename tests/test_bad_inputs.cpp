// Every app, every flag, every path: a value that means nothing (NaN, ±inf, negative, zero, absurd)
// or a path that is missing, a directory, a device or cannot be created gets one "error: ..."
// line and exit code 1 or 2, never a signal, a hang or a silent default. One table per app.
#include "tests/catch.h"

#include <filesystem>
#include <string>
#include <vector>

#include "tests/app_runner.h"

using namespace hg::test;
namespace fs = std::filesystem;

namespace {

struct Case {
    std::string flags;   // appended to the app's working command line
    std::string phrase;  // the error line must contain it
};

void expect_errors(const std::string& base, const std::vector<Case>& cases) {
    for (const Case& c : cases) {
        INFO(c.flags);
        const Run r = run(base + " " + c.flags + " < /dev/null");
        expect_error(r, c.phrase);
        // one line: the error, and nothing after it
        CHECK(r.output.find('\n', r.output.find("error: ")) + 1 == r.output.size());
    }
}

// A directory with a text file, a tiny checkpoint trained on it, a plain file and a directory.
struct Setup {
    TempDir tmp{"handgrad-bad"};
    std::string data, ckpt, file, dir, nowhere;
    Setup() {
        data = write_file(tmp.path / "data.txt",
                          corpus(60, "the quality of mercy is not strained; it droppeth as the gentle rain.\n"));
        file = write_file(tmp.path / "plain", "x");
        dir = (tmp.path / "dir").string();
        fs::create_directories(dir);
        nowhere = "/proc/handgrad-no-such-dir/x";  // /proc takes no new directories, even from root
        const Run r = run(bin("train") + kTiny +
                          " --eval_iters=1 --batch_threads=1 --warmup_iters=1 --max_iters=1 --data=" + data +
                          " --out_dir=" + (tmp.path / "out").string());
        INFO(r.output);
        REQUIRE(r.status == 0);
        ckpt = (tmp.path / "out" / "ckpt.safetensors").string();
    }
};

}  // namespace

TEST_CASE("train: meaningless numbers and unusable paths are refused in one line", "[robust][errors][apps]") {
    Setup s;
    const std::string base = bin("train") + kTiny +
                             " --eval_iters=1 --batch_threads=1 --max_iters=2 --warmup_iters=1 --data=" + s.data +
                             " --out_dir=" + (s.tmp.path / "o").string();
    expect_errors(base, {
                            {"--learning_rate=nan", "learning_rate"},
                            {"--learning_rate=inf", "learning_rate"},
                            {"--learning_rate=-inf", "learning_rate"},
                            {"--min_lr=nan", "min_lr"},
                            {"--beta1=nan", "beta1"},
                            {"--beta2=inf", "beta2"},
                            {"--beta1=1", "beta1"},
                            {"--eps=inf", "eps"},
                            {"--eps=nan", "eps"},
                            {"--eps=0", "eps"},
                            {"--weight_decay=nan", "weight_decay"},
                            {"--weight_decay=-1", "weight_decay"},
                            {"--grad_clip=nan", "grad_clip"},
                            {"--grad_clip=inf", "grad_clip"},
                            {"--grad_clip=-1", "grad_clip"},
                            {"--dropout=nan", "dropout"},
                            {"--dropout=-0.1", "dropout"},
                            {"--dropout=1", "dropout"},
                            {"--time_budget=nan --max_iters=0", "time_budget"},
                            {"--max_iters=-1", "max_iters"},
                            {"--eval_interval=0", "eval_interval"},
                            {"--eval_iters=0", "eval_iters"},
                            {"--log_interval=0", "log_interval"},
                            {"--warmup_iters=-1", "warmup_iters"},
                            {"--lr_decay_iters=-5", "lr_decay_iters"},
                            {"--gradient_accumulation_steps=0", "gradient_accumulation_steps"},
                            {"--gradient_accumulation_steps=2000000000", "gradient_accumulation_steps"},
                            {"--eval_iters=2000000000", "eval_iters"},
                            {"--batch_size=-1", "batch_size"},
                            {"--batch_threads=0", "batch_threads"},
                            {"--batch_threads=3", "batch_threads"},
                            {"--n_head=0", "n_head"},
                            {"--n_embd=-16", "n_embd"},
                            {"--n_layer=0", "n_layer"},
                            {"--n_layer=100000000", "n_layer"},
                            {"--block_size=2000000000", "block_size"},
                            {"--lr_replans=5:3", "re-plan"},
                            {"--lr_decay=foo", "foo"},
                            {"--lr_decay=wsd --cooldown_frac=0", "cooldown_frac"},
                            {"--lr_decay=wsd --cooldown_frac=1.5", "cooldown_frac"},
                            {"--lr_decay=wsd --cooldown_frac=nan", "cooldown_frac"},
                            {"--cooldown_frac=x", "cooldown_frac"},
                            {"--cooldown_frac=0.3", "only --lr_decay=wsd"},
                            {"--dtype=float16", "dtype"},
                            {"--dtype=", "dtype"},
                            {"--dtype=BFloat16", "dtype"},
                            {"--attention=fused", "attention"},
                            {"--attention=", "attention"},
                            {"--attention=Flash", "attention"},
                            {"--recompute=all", "recompute"},
                            {"--recompute=", "recompute"},
                            {"--recompute=1", "recompute"},
                            {"--threads=-1", "--threads"},
                            {"--threads=1000000", "--threads"},
                            {"--matmul=cuda", "--matmul"},
                            {"--matmul=", "--matmul"},
                            // the memory check: refused with the numbers before anything is allocated
                            {"--batch_size=100000000", "GiB available"},
                            {"--data=" + s.dir, s.dir},
                            {"--data=/dev/zero", "not a regular file"},
                            {"--data=" + (s.tmp.path / "missing.txt").string(), "missing.txt"},
                            {"--out_dir=" + s.file, "--out_dir"},
                            {"--out_dir=" + s.file + "/sub", "--out_dir"},
                            {"--out_dir=" + s.nowhere, "--out_dir"},
                        });
}

TEST_CASE("sample: temperature 0 is greedy; what has no meaning is refused", "[robust][errors][apps]") {
    Setup s;
    // sample, eval and activations take each flag once: every row gives its own
    const std::string base = bin("sample");
    const std::string ok = base + " --ckpt=" + s.ckpt;
    expect_errors(ok, {
        {"--temperature=nan", "temperature"}, {"--temperature=-1", "temperature"}, {"--temperature=inf", "temperature"},
        {"--temperature=-inf", "temperature"}, {"--top_k=-1", "top_k"}, {"--num_samples=0", "num_samples"},
        {"--max_new_tokens=-1", "max_new_tokens"}, {"--threads=0", "--threads"}, {"--threads=1000000", "--threads"},
        {"--start=", "--start"}, {"--start=FILE:" + s.dir, s.dir}, {"--start=FILE:/dev/zero", "not a regular file"},
        {"--matmul=blas", "--matmul"},
    });
    expect_errors(base, {
        {"--ckpt=" + s.dir, s.dir}, {"--ckpt=/dev/zero", "not a regular file"}, {"--out_dir=" + s.file, "plain"},
    });
    // 0 is greedy: the same text whatever the seed
    const Run a = run(ok + " --max_new_tokens=8 --temperature=0 --seed=1");
    const Run b = run(ok + " --max_new_tokens=8 --temperature=0 --seed=2");
    CHECK(a.status == 0);
    CHECK(a.output == b.output);
}

TEST_CASE("eval, inspect, activations, bench, crosscheck, tokenize: bad numbers and paths in one line",
          "[robust][errors][apps]") {
    Setup s;
    const std::string text = " --text=" + s.data;
    expect_errors(bin("eval") + " --ckpt=" + s.ckpt, {
        {"--batch_size=0" + text, "batch_size"}, {"--batch_size=-1" + text, "batch_size"},
        {"--batch_size=100000000" + text, "GiB available"}, {"--threads=-1" + text, "--threads"},
        {"--threads=1000000" + text, "--threads"}, {"--split=x --data=" + s.data, "split"},
        {"--text=" + s.dir, s.dir}, {"--text=/dev/zero", "not a regular file"}, {"--matmul=gpu" + text, "--matmul"},
    });
    expect_errors(bin("eval") + text, {{"--ckpt=" + s.dir, s.dir}});
    expect_errors(bin("inspect"), {
        {"--batch_size=0", "batch_size"}, {"--T=-1", "T"}, {"--T=100000", "T"}, {"--n_layer=100000000", "n_layer"},
        {"--ckpt=" + s.dir, s.dir}, {"--residual_norms --T=-5", "T"},
        {"--residual_norms --block_size=400000 --n_embd=4096 --n_head=2", "GiB available"},
        {"--causality --matmul=gpu", "--matmul"}, {"--matmul=", "--matmul"},
    });
    expect_errors(bin("activations") + " --ckpt=" + s.ckpt, {
        {"--prompt=the --out=" + s.dir, s.dir}, {"--prompt=the --out=" + s.nowhere, s.nowhere},
        {"--prompt=the --fresh_init=foo", "foo"}, {"--prompt=", "prompt"}, {"--prompt=the --change_to=tt", "change_to"},
    });
    expect_errors(bin("bench") + " --n_layer=1 --n_embd=16 --n_head=2 --block_size=8 --steps=1 --warmup=0",
                  {
                      {"--steps=0", "steps"},
                      {"--warmup=-1", "warmup"},
                      {"--batch_size=0", "batch_size"},
                      {"--batch_size=100000000", "GiB available"},
                      {"--threads=-1", "--threads"},
                      {"--threads=1000000", "--threads"},
                      {"--batch_threads=0", "batch"},
                      {"--batch_threads=5", "batch"},
                      {"--dtype=bf16", "dtype"},
                      {"--matmul=mkl", "--matmul"},
                      {"--matmul_bf16=fast", "--matmul_bf16 must be"},
                      {"--matmul_bf16=auto", "--matmul_bf16: bench times the way it is given"},
                      {"--attention=sdpa", "attention"},
                      {"--recompute=blocks", "recompute"},
                  });
    expect_errors(bin("crosscheck") + " --n_layer=1 --n_embd=16 --n_head=2 --block_size=8 --vocab_size=10 --ckpt=" +
                      (s.tmp.path / "cc.st").string() + " --out=" + (s.tmp.path / "cc.out").string(), {
        {"--batch_size=0", "batch_size"}, {"--seq_len=100", "seq_len"}, {"--learning_rate=nan", "learning_rate"},
        {"--beta1=2", "beta1"}, {"--eps=-1", "eps"}, {"--grad_clip=nan", "grad_clip"}, {"--grad_clip=inf", "grad_clip"},
        {"--threads=1000000", "--threads"}, {"--out=" + s.dir, s.dir}, {"--ckpt=" + s.nowhere, s.nowhere},
    });
    expect_errors(bin("tokenize"), {
        {"--tokenizer=char --data=" + s.dir, s.dir}, {"--tokenizer=char --ckpt=" + s.dir, s.dir},
        {"--tokenizer=gpt2 --gpt2_dir=" + s.file, "plain"}, {"--tokenizer=foo", "foo"},
        {"--tokenizer=char --data=/dev/zero", "not a regular file"},
    });
}

TEST_CASE("output into a closed pipe is one error line and exit 1, not SIGPIPE", "[robust][errors][apps]") {
    TempDir tmp{"handgrad-pipe"};
    std::string text;
    for (int i = 0; i < 20000; i++) text += "the quality of mercy is not strained; it droppeth as the gentle rain.\n";
    const std::string data = write_file(tmp.path / "data.txt", text);
    // tokenize writes ~3 MB of ids; `head -c 1` closes the pipe after the first byte.
    const Run r = run("bash -c '" + bin("tokenize") + " --tokenizer=char --data=" + data + " < " + data +
                      " | head -c 1 > /dev/null; exit ${PIPESTATUS[0]}'");
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK(r.output.find("error: ") != std::string::npos);
}

TEST_CASE("output onto a full disk is one error line and exit 1, not a silent short file", "[robust][errors][apps]") {
    if (!std::filesystem::exists("/dev/full")) return;
    TempDir tmp{"handgrad-full"};
    const std::string data = write_file(tmp.path / "data.txt", "to be or not to be\n");
    const Run r = run("(" + bin("tokenize") + " --tokenizer=char --data=" + data + " < " + data + " > /dev/full)");
    expect_error(r, "cannot write to standard output");
    // With stderr on the full disk too the error line is lost, but the exit is still an orderly 1.
    const Run both = run("bash -c '" + bin("tokenize") + " --tokenizer=char --data=" + data + " < " + data +
                         " > /dev/full 2>&1; echo exit $?'");
    CHECK(both.output == "exit 1\n");
}

// A run as a file (apps/config_file.h): --config=FILE for every app, flags on the command line
// over the file, train's out_dir/run.toml replaying its run to the byte, bad files refused.
#include "tests/catch.h"

#include <fmt/format.h>

#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "lib/train/train_config.h"
#include "tests/app_runner.h"

using namespace hg::test;
namespace fs = std::filesystem;

namespace {

// A tiny run as a file: the values of kTiny, one thread, four iterations.
std::string tiny_config(const std::string& data, const std::string& out_dir) {
    return "# a tiny run\n"
           "n_layer = 2\nn_head = 2\nn_embd = 16\nblock_size = 16\nbatch_size = 4\n"
           "max_iters = 4\neval_interval = 2\neval_iters = 1\nwarmup_iters = 1\n"
           "threads = 1\nbatch_threads = \"1\"\n"
           "data = \"" + data + "\"\nout_dir = \"" + out_dir + "\"\n";
}

}  // namespace

TEST_CASE("--config: train reads a TOML file, flags override it, run.toml replays the run byte for byte",
          "[config][apps]") {
    TempDir tmp("handgrad-config");
    const std::string data = write_file(tmp.path / "data.txt", corpus());
    const std::string out = (tmp.path / "out").string();
    const std::string cfg = write_file(tmp.path / "run.toml", tiny_config(data, out));

    // The file's values, and --n_layer=1 over its n_layer = 2.
    Run r = run(bin("train") + " --config=" + cfg + " --n_layer=1");
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK(r.output.find("L=1 NH=2 C=16 block_size=16") != std::string::npos);
    CHECK(r.output.find("threads: 1,") != std::string::npos);
    const std::string written = read_bytes(fs::path(out) / "run.toml");
    for (const char* line : {"\nn_layer = 1\n", "\nn_embd = 16\n", "\nmax_iters = 4\n", "\nthreads = 1\n",
                             "\nbatch_threads = 1\n", "\ntokenizer = \"char\"\n", "\nlr_decay_iters = 4\n"}) {
        INFO(line);
        CHECK(written.find(line) != std::string::npos);
    }
    CHECK(written.find("\nconfig") == std::string::npos);  // the file names no other file

    // The run again from its run.toml, into the same out_dir: the same checkpoint, byte for
    // byte, and the same run.toml.
    const std::string first = read_bytes(fs::path(out) / "ckpt.safetensors");
    fs::remove(fs::path(out) / "ckpt.safetensors");
    r = run(bin("train") + " --config=" + out + "/run.toml");
    REQUIRE(r.status == 0);
    CHECK(read_bytes(fs::path(out) / "ckpt.safetensors") == first);
    CHECK(read_bytes(fs::path(out) / "run.toml") == written);
}

TEST_CASE("--config: a preset in the file sets train's defaults as --preset does", "[config][apps]") {
    TempDir tmp("handgrad-config");
    const std::string data = write_file(tmp.path / "data.txt", corpus());
    const std::string out = (tmp.path / "out").string();
    // finetune-shakespeare's training recipe (log every step, beta2 0.95, a constant lr) at a tiny size.
    const std::string cfg =
        write_file(tmp.path / "c.toml", "preset = \"finetune-shakespeare\"\n" + tiny_config(data, out));
    const Run r = run(bin("train") + " --config=" + cfg);
    INFO(r.output);
    REQUIRE(r.status == 0);
    const hg::TrainConfig ft = hg::train_preset("finetune-shakespeare"), course = hg::train_preset("course");
    REQUIRE(ft.log_interval != course.log_interval);
    REQUIRE(ft.adamw.beta2 != course.adamw.beta2);
    const std::string written = read_bytes(fs::path(out) / "run.toml");
    CHECK(written.find("\npreset = \"finetune-shakespeare\"\n") != std::string::npos);
    CHECK(written.find(fmt::format("\nlog_interval = {}\n", ft.log_interval)) != std::string::npos);
    CHECK(written.find(fmt::format("\nbeta2 = {}\n", ft.adamw.beta2)) != std::string::npos);
    CHECK(written.find("\ndecay_lr = false\n") != std::string::npos);
}

TEST_CASE("--config: every app takes it; a missing or unreadable file, an unknown key: one line, exit 1",
          "[config][apps][errors]") {
    TempDir tmp("handgrad-config");
    const std::string unknown = write_file(tmp.path / "unknown.toml", "no_such_flag = 3\n");
    for (const char* app : {"activations", "bench", "bench_sample", "crosscheck", "eval", "inspect", "llmc", "logits",
                            "sample", "tokenize", "train"}) {
        INFO(app);
        const Run r = run(bin(app) + " --config=" + unknown + " < /dev/null");
        expect_error(r, "unknown key 'no_such_flag'");
        CHECK(r.status == 1);
    }
    const std::string out = (tmp.path / "out").string();
    const std::string data = write_file(tmp.path / "data.txt", corpus());
    const std::string elf = write_file(tmp.path / "elf.toml", read_bytes(bin("tokenize")).substr(0, 200));
    const std::string nested = write_file(tmp.path / "nested.toml", "config = \"" + unknown + "\"\n");
    for (const auto& [file, phrase] : std::vector<std::pair<std::string, std::string>>{
             {(tmp.path / "none.toml").string(), "none.toml was not readable"},
             {tmp.path.string(), "was not readable"},
             {unknown, "unknown key 'no_such_flag'"},
             {elf, "unknown key"},
             {nested, "not allowed in a configuration file"}}) {
        const Run r = run(bin("train") + " --config=" + file + " --data=" + data + " --out_dir=" + out);
        expect_error(r, phrase);
        CHECK(r.status == 1);
        CHECK(r.output.find('\n', r.output.find("error: ")) + 1 == r.output.size());
        CHECK(!fs::exists(out));  // nothing written
    }
}

TEST_CASE("--config: the command line wins over the file for every kind of flag, --preset included",
          "[config][apps]") {
    TempDir tmp("handgrad-config-precedence");
    const std::string data = write_file(tmp.path / "data.txt", corpus());
    const std::string out = (tmp.path / "out").string();
    // The file sets each flag one way; the command line the other. A file that won anywhere
    // would show in the run (its data path does not exist; its out_dir is another).
    const std::string cfg = write_file(tmp.path / "c.toml",
        "preset = \"finetune-shakespeare\"\n"  // read before the parse: sets train's defaults
        "n_layer = 2\n"                        // an integer
        "learning_rate = 0.002\n"              // a float
        "min_lr = 0.0005\n"                    // a float whose default follows another flag
        "seed = 7\n"                           // an unsigned integer
        "optimizer = \"muon\"\n"               // a word, parsed after the parse
        "norm = \"rmsnorm\"\n"                 // a word applied only when given
        "dtype = \"bfloat16\"\n"
        "attention = \"materialized\"\n"
        "recompute = \"block\"\n"
        "qk_norm = true\n"                     // a flag, turned off on the command line by value
        "init_zero_proj = false\n"             // a flag, turned on on the command line bare
        "decay_lr = false\n"                   // a boolean option
        "tie_weights = true\n"
        "batch_threads = \"2\"\n"              // a number or auto
        "tokenizer = \"gpt2\"\n"
        "threads = 2\n"
        "matmul = \"highway\"\n"
        "data = \"" + (tmp.path / "no-such-file.txt").string() + "\"\n"
        "out_dir = \"" + (tmp.path / "file-out").string() + "\"\n");
    const Run r = run(bin("train") + kTiny + " --config=" + cfg + " --preset=course --n_layer=1 --learning_rate=0.003 "
                      "--min_lr=0.0001 --seed=8 --optimizer=adamw --norm=layernorm --dtype=float32 --attention=flash "
                      "--recompute=none --qk_norm=false --init_zero_proj --decay_lr=true --tie_weights=false "
                      "--batch_threads=1 --tokenizer=char "
                      "--threads=1 --matmul=openblas --max_iters=2 --eval_interval=2 --data=" + data +
                      " --out_dir=" + out);
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK(!fs::exists(tmp.path / "file-out"));
    const std::string written = read_bytes(fs::path(out) / "run.toml");
    INFO(written);
    const hg::TrainConfig course = hg::train_preset("course"), ft = hg::train_preset("finetune-shakespeare");
    REQUIRE(course.log_interval != ft.log_interval);
    REQUIRE(course.adamw.beta2 != ft.adamw.beta2);
    for (const std::string& line : {std::string("preset = \"course\""),
                                    fmt::format("log_interval = {}", course.log_interval),
                                    fmt::format("beta2 = {}", course.adamw.beta2), std::string("n_layer = 1"),
                                    std::string("learning_rate = 0.003"), std::string("min_lr = 0.0001"),
                                    std::string("seed = 8"), std::string("optimizer = \"adamw\""),
                                    std::string("norm = \"layernorm\""), std::string("dtype = \"float32\""),
                                    std::string("attention = \"flash\""), std::string("recompute = \"none\""),
                                    std::string("qk_norm = false"), std::string("init_zero_proj = true"),
                                    std::string("decay_lr = true"), std::string("tie_weights = false"),
                                    std::string("batch_threads = 1"), std::string("tokenizer = \"char\""),
                                    std::string("threads = 1"), std::string("matmul = \"openblas\""),
                                    "data = \"" + data + "\"", "out_dir = \"" + out + "\""}) {
        INFO(line);
        CHECK(written.find("\n" + line + "\n") != std::string::npos);
    }
}

namespace {

// Every flag build/train lists in --help: its flag table, as a user sees it.
std::vector<std::string> train_flag_names() {
    const Run help = run(bin("train") + " --help");
    REQUIRE(help.status == 0);
    std::vector<std::string> names;
    const std::regex flag("^  (-[a-zA-Z],)?--([a-z0-9_]+)");  // "  --n_layer INT  L", "  -h,--help ..."
    std::istringstream lines(help.output);
    std::smatch m;
    for (std::string line; std::getline(lines, line);)
        if (std::regex_search(line, m, flag)) names.push_back(m[2]);
    return names;
}

}  // namespace

TEST_CASE("--config: run.toml names every flag that changes a run, and replays a bf16 Muon run on shards byte for byte",
          "[config][apps][shards]") {
    TempDir tmp("handgrad-config-replay");
    const std::string text = write_file(tmp.path / "data.txt", corpus());
    const std::string shards = (tmp.path / "shards").string();
    REQUIRE(run(bin("prepare") + " --quiet --tokenizer=char --out_dir=" + shards + " " + text).status == 0);
    const std::string out = (tmp.path / "out").string();
    Run r = run(bin("train") + kTiny + " --dtype=bfloat16 --optimizer=muon --muon_lr=0.02 --qk_norm --norm=rmsnorm "
                "--attention=materialized --recompute=block --batch_threads=1 "
                "--max_iters=4 --eval_interval=2 --data=" + shards + " --out_dir=" + out);
    INFO(r.output);
    REQUIRE(r.status == 0);
    const std::string written = read_bytes(fs::path(out) / "run.toml");
    INFO(written);
    // The flag table, not a list kept here: a new flag that run.toml leaves out fails this. Left
    // out on purpose: --help, --config (a file that names another), --bias (bias_layout says it).
    const std::vector<std::string> flags = train_flag_names();
    CHECK(flags.size() > 40);
    for (const std::string& name : flags) {
        if (name == "help" || name == "config" || name == "bias") continue;
        INFO(name);
        CHECK(written.find("\n" + name + " = ") != std::string::npos);
    }
    for (const char* line : {"dtype = \"bfloat16\"", "optimizer = \"muon\"", "muon_lr = 0.02", "qk_norm = true",
                             "norm = \"rmsnorm\"", "attention = \"materialized\"", "recompute = \"block\""}) {
        INFO(line);
        CHECK(written.find(std::string("\n") + line + "\n") != std::string::npos);
    }
    CHECK(written.find("\ndata = \"" + shards + "\"\n") != std::string::npos);

    // Replayed from its file alone: the same checkpoint, byte for byte, and the same file.
    const std::string first = read_bytes(fs::path(out) / "ckpt.safetensors");
    fs::remove(fs::path(out) / "ckpt.safetensors");
    r = run(bin("train") + " --config=" + out + "/run.toml");
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK(r.output.find("dtype: bfloat16") != std::string::npos);
    CHECK(r.output.find("attention: materialized, recompute: block") != std::string::npos);
    CHECK(read_bytes(fs::path(out) / "ckpt.safetensors") == first);
    CHECK(read_bytes(fs::path(out) / "run.toml") == written);
}

// A run as a file (apps/config_file.h): --config=FILE for every app, flags on the command line
// over the file, train's out_dir/run.toml replaying its run to the byte, bad files refused.
#include "tests/catch.h"

#include <filesystem>
#include <string>

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

TEST_CASE("--config: train reads a TOML file, flags override it, run.toml replays the run byte for byte", "[config][apps]") {
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
    const std::string cfg = write_file(tmp.path / "c.toml", "preset = \"finetune-shakespeare\"\n" + tiny_config(data, out));
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

TEST_CASE("--config: every app takes it; a missing or unreadable file, an unknown key: one line, exit 1", "[config][apps][errors]") {
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

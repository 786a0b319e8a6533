// app_runner.h — running the built apps from tests: a command's exit status and output,
// temporary directories, and whole-file reads and writes.
#pragma once
#include "tests/catch.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "lib/checkpoint/checkpoint.h"

namespace hg::test {

struct Run {
    int status;          // the exit code (128 + signal if killed)
    std::string output;  // stdout and stderr
};

// The path of an app in the build the tests belong to (make sets HANDGRAD_BIN).
inline std::string bin(const std::string& app) {
    const char* dir = std::getenv("HANDGRAD_BIN");
    return std::string(dir ? dir : "build") + "/" + app;
}

inline Run run(const std::string& cmd) {
    Run r{0, ""};
    FILE* p = popen((cmd + " 2>&1").c_str(), "r");
    REQUIRE(p != nullptr);
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
    const int st = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return r;
}

inline std::string write_file(const std::filesystem::path& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
}

inline std::string read_bytes(const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// One "error: ..." line, naming `phrase`, and a non-zero exit (an orderly one, not a signal).
inline void expect_error(const Run& r, const std::string& phrase) {
    INFO(r.output);
    CHECK(r.status != 0);
    CHECK(r.status < 128);
    CHECK(r.output.find("error: ") != std::string::npos);
    CHECK(r.output.find(phrase) != std::string::npos);
}

// Checks that two checkpoint files hold the same tensors (weights and both AdamW moments), byte
// for byte, whatever their metadata says; returns how many were compared.
inline int check_same_tensors(const std::string& path_a, const std::string& path_b) {
    const Checkpoint a = Checkpoint::load(path_a), b = Checkpoint::load(path_b);
    int compared = 0;
    for (const std::string& name : a.file.names()) {
        const auto &ea = a.file.get(name), &eb = b.file.get(name);
        INFO(name);
        REQUIRE(ea.nbytes() == eb.nbytes());
        CHECK(std::memcmp(ea.data, eb.data, ea.nbytes()) == 0);
        compared++;
    }
    return compared;
}

// Resuming is exact: `common` (train and its flags, no --max_iters or --out_dir) trained to `half`
// iterations in out_dir b and then resumed there to `iters` ends with the checkpoint, bit for bit,
// of the straight run of `iters` already in out_dir a. Returns the resumed run.
inline Run check_resume_exact(const std::string& common, const std::string& a, const std::string& b, int half,
                              int iters) {
    const Run first = run(common + " --max_iters=" + std::to_string(half) + " --out_dir=" + b);
    INFO(first.output);
    REQUIRE(first.status == 0);
    Run resumed = run(common + " --max_iters=" + std::to_string(iters) + " --init_from=resume --out_dir=" + b);
    INFO(resumed.output);
    REQUIRE(resumed.status == 0);
    CHECK(check_same_tensors(a + "/ckpt.safetensors", b + "/ckpt.safetensors") > 0);
    return resumed;
}

// A text for the app tests to train on: `line` repeated `times` times (a few kB; windows of 17
// tokens in both splits).
inline std::string corpus(
    int times = 80,
    const std::string& line = "to be or not to be, that is the question; whether 'tis nobler in the mind.\n") {
    std::string s;
    for (int i = 0; i < times; i++) s += line;
    return s;
}

// The flags of a tiny run: one block of width 16 over 16 positions, batches of 4, two batches
// per evaluation, warmup 2, one thread; each run takes well under a second. A test adds its
// own flags after these, and a flag given twice takes its last value. The matmul backend is
// named: runs compared with one another must use the same one (lib/kernels/matmul.h), and auto
// may pick either when their times are close (lib/train/matmul_choice.h); tests of auto say so.
inline const std::string kTiny =
    " --n_layer=1 --n_head=2 --n_embd=16 --block_size=16 --batch_size=4 --eval_iters=2 --threads=1 --warmup_iters=2"
    " --matmul=openblas";

// The tiny Shakespeare path from HANDGRAD_DATA, or "" (and a warning) when it is not set.
inline std::string shakespeare_path() {
    const char* p = std::getenv("HANDGRAD_DATA");
    if (!p || !*p) {
        WARN("HANDGRAD_DATA is not set: skipping the tiny Shakespeare checks");
        return "";
    }
    return p;
}

// A fresh directory under /tmp, removed with everything in it when the test ends.
struct TempDir {
    std::filesystem::path path;
    explicit TempDir(const std::string& prefix = "handgrad-test") {
        path = std::filesystem::temp_directory_path() /
               (prefix + "-" + std::to_string(getpid()) + "-" + std::to_string(rand()));
        std::filesystem::create_directories(path);
    }
    ~TempDir() { std::filesystem::remove_all(path); }
};

// Sets HANDGRAD_CACHE_DIR (lib/train/startup_cache.h) for the scope and puts back what was there.
struct CacheDir {
    std::string before;
    explicit CacheDir(const std::string& dir) : before(std::getenv("HANDGRAD_CACHE_DIR") ?: "off") {
        setenv("HANDGRAD_CACHE_DIR", dir.c_str(), 1);
    }
    ~CacheDir() { setenv("HANDGRAD_CACHE_DIR", before.c_str(), 1); }
};

}  // namespace hg::test

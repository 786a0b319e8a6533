// How a training run ends when its environment ends it: the signals a terminal, `timeout`, a
// container runtime or a batch scheduler sends (each saves and exits cleanly, a burst of them
// too), a second run on the same out_dir (refused while the first holds it), and kill -9 at
// random moments (the last checkpoint always loads and resumes).
#include "tests/catch.h"

#include <signal.h>

#include <filesystem>
#include <random>
#include <string>

#include "lib/checkpoint/atomic_file.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/checkpoint/safetensors.h"
#include "lib/process/run_lock.h"
#include "lib/process/stop_signal.h"
#include "tests/app_runner.h"
#include "tests/spawn.h"

using namespace hg;
using namespace hg::test;
namespace fs = std::filesystem;

namespace {

std::string winter_text() {
    return corpus(60, "now is the winter of our discontent made glorious summer by this sun of york.\n");
}

// A tiny run that logs every step and never finishes by itself.
const std::string kEndless = kTiny + " --eval_iters=1 --batch_threads=1 --log_interval=1 --max_iters=100000000";

std::string train_cmd(const fs::path& dir, const std::string& extra = "") {
    return bin("train") + kEndless + " --data=" + (dir / "data.txt").string() + " --out_dir=" + (dir / "out").string() +
           extra;
}

}  // namespace

TEST_CASE("stop signals are recorded, the first one named, until cleared", "[robust][signals]") {
    install_stop_signals();
    clear_stop_request();
    CHECK_FALSE(stop_requested());
    raise(SIGUSR2);
    raise(SIGUSR1);  // a second signal changes nothing: the first is the one reported
    CHECK(stop_requested());
    CHECK(std::string(stop_signal_name()) == "SIGUSR2");
    clear_stop_request();
    CHECK_FALSE(stop_requested());
    CHECK(std::string(stop_signal_name()).empty());
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2}) signal(sig, SIG_DFL);  // the test runner's own again
}

TEST_CASE("each signal that ends a job saves a checkpoint at the current step and exits 0", "[robust][signals][apps]") {
    TempDir tmp("handgrad-signals");
    write_file(tmp.path / "data.txt", winter_text());
    const std::pair<int, std::string> signals[] = {{SIGTERM, "SIGTERM"}, {SIGHUP, "SIGHUP"}, {SIGUSR1, "SIGUSR1"},
                                                   {SIGUSR2, "SIGUSR2"}, {SIGINT, "SIGINT"}};
    for (const auto& [sig, name] : signals) {
        INFO(name);
        fs::remove_all(tmp.path / "out");
        const std::string log_path = (tmp.path / ("log-" + name)).string();  // a fresh log: no earlier run's lines
        const Spawned run = spawn(train_cmd(tmp.path, " --eval_interval=100000000"), log_path);
        REQUIRE(wait_for_output(run, "iter 2:"));
        kill(run.pid, sig);
        const int status = wait_exit(run);
        const std::string log = read_bytes(run.log);
        INFO(log);
        CHECK(status == 0);
        CHECK(log.find("interrupted by " + name + ": saved checkpoint at iter ") != std::string::npos);
        const Checkpoint ck = Checkpoint::load((tmp.path / "out" / "ckpt.safetensors").string());
        CHECK(ck.progress.iter_num >= 3);
    }
}

TEST_CASE("a burst of signals while saving corrupts nothing: one save, one exit, a checkpoint that loads",
          "[robust][signals][apps]") {
    TempDir tmp("handgrad-signals");
    write_file(tmp.path / "data.txt", winter_text());
    // Saving at every step, so the burst lands on a save in progress as often as not.
    const Spawned run = spawn(train_cmd(tmp.path, " --eval_interval=1"), (tmp.path / "log").string());
    REQUIRE(wait_for_output(run, "iter 3:"));
    for (int sig : {SIGTERM, SIGTERM, SIGINT, SIGUSR1, SIGHUP, SIGTERM}) kill(run.pid, sig);
    const int status = wait_exit(run);
    const std::string log = read_bytes(run.log);
    INFO(log);
    CHECK(status == 0);
    // which of the pending signals the kernel delivers first is its choice (the lowest number)
    CHECK(log.find("interrupted by SIG") != std::string::npos);
    CHECK(log.find(": saved checkpoint at iter ") != std::string::npos);
    CHECK(log.find("interrupted by", log.find("interrupted by") + 1) == std::string::npos);  // once
    const Checkpoint ck = Checkpoint::load((tmp.path / "out" / "ckpt.safetensors").string());
    CHECK(ck.progress.iter_num >= 4);
    for (const auto& e : fs::directory_iterator(tmp.path / "out"))
        CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
}

TEST_CASE("a run lock is exclusive, names its holder, and is free again once released", "[robust][lock]") {
    TempDir tmp("handgrad-lock");
    const std::string dir = (tmp.path / "a" / "b").string();  // created with its parents
    {
        RunLock held(dir);
        CHECK(read_bytes(held.path()).find("pid " + std::to_string(getpid())) != std::string::npos);
        // flock locks belong to an open file: a second open, even in this process, is refused
        try {
            RunLock second(dir);
            FAIL("a second lock on a held out_dir was granted");
        } catch (const Error& e) {
            const std::string what = e.what();
            CHECK(what.find("in use by another run") != std::string::npos);
            CHECK(what.find("pid " + std::to_string(getpid())) != std::string::npos);
        }
    }
    CHECK_NOTHROW(RunLock(dir));  // released
    write_file(tmp.path / "file", "x");
    CHECK_THROWS_WITH(RunLock((tmp.path / "file").string()), Catch::Contains("cannot create --out_dir"));
    CHECK_THROWS_WITH(RunLock((tmp.path / "file" / "sub").string()), Catch::Contains("cannot create --out_dir"));
}

TEST_CASE("a second run on a busy out_dir is refused, naming the first; once it dies, resume works",
          "[robust][lock][apps]") {
    TempDir tmp("handgrad-lock");
    write_file(tmp.path / "data.txt", winter_text());
    const Spawned first = spawn(train_cmd(tmp.path, " --eval_interval=2"), (tmp.path / "log").string());
    REQUIRE(wait_for_output(first, "saved checkpoint"));
    const Run second = run(train_cmd(tmp.path, " --init_from=resume --max_iters=3"));
    expect_error(second, "is in use by another run");
    CHECK(second.output.find("pid " + std::to_string(first.pid)) != std::string::npos);
    kill(first.pid, SIGKILL);  // the kernel releases the lock of a process however it dies
    CHECK(wait_exit(first) == 128 + SIGKILL);
    const Checkpoint ck = Checkpoint::load((tmp.path / "out" / "ckpt.safetensors").string());
    const Run resumed = run(train_cmd(tmp.path, " --init_from=resume --eval_interval=2 --max_iters=" +
                                                    std::to_string(ck.progress.iter_num + 2)));
    INFO(resumed.output);
    CHECK(resumed.status == 0);
    CHECK(resumed.output.find("resuming") != std::string::npos);
}

TEST_CASE("unfinished saves (path.tmp.<pid>) are removed, and nothing else is", "[robust][kill]") {
    TempDir tmp("handgrad-tmp");
    const std::string ck = (tmp.path / "ckpt.safetensors").string();
    write_file(ck + ".tmp.1234", "half a file");
    write_file(ck + ".tmp.99", "");
    write_file(ck + ".tmp.12x", "not ours");
    write_file(tmp.path / "other.safetensors.tmp.5", "not ours");
    write_file(ck, "the checkpoint");
    CHECK(remove_unfinished_saves(ck) == 2);
    CHECK_FALSE(fs::exists(ck + ".tmp.1234"));
    CHECK_FALSE(fs::exists(ck + ".tmp.99"));
    CHECK(fs::exists(ck + ".tmp.12x"));
    CHECK(fs::exists(tmp.path / "other.safetensors.tmp.5"));
    CHECK(read_bytes(ck) == "the checkpoint");
}

TEST_CASE("kill -9 at random moments of a run saving every step: the last checkpoint always loads and resumes",
          "[robust][kill][apps]") {
    TempDir tmp("handgrad-kill");
    write_file(tmp.path / "data.txt", winter_text());
    const std::string ck = (tmp.path / "out" / "ckpt.safetensors").string();
    std::mt19937 gen(19);
    std::uniform_int_distribution<int> delay_ms(0, 300);
    const int kKills = 24;
    int last_iter = 0, loaded = 0;
    for (int k = 0; k < kKills; k++) {
        const bool resume = fs::exists(ck);
        const Spawned run = spawn(train_cmd(tmp.path, std::string(" --eval_interval=1") +
                                                          (resume ? " --init_from=resume" : "")),
                                  (tmp.path / ("log-" + std::to_string(k))).string());
        // Every other kill lands during start-up, the rest once it trains (and saves every step).
        if (k % 2 == 1) wait_for_output(run, "iter ");
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(gen)));
        kill(run.pid, SIGKILL);
        const int status = wait_exit(run);
        INFO("kill " << k << ": " << read_bytes(run.log));
        CHECK((status == 128 + SIGKILL || status == 0));
        if (!fs::exists(ck)) continue;  // killed before its first save
        const Checkpoint c = Checkpoint::load(ck);  // throws (fails the test) on a torn file
        CHECK(c.progress.iter_num >= last_iter);    // never goes back
        last_iter = c.progress.iter_num;
        loaded++;
    }
    WARN(kKills << " kills survived; the checkpoint loaded after " << loaded << " of them, at iter " << last_iter);
    REQUIRE(loaded > 0);
    // The run goes on from the last checkpoint, and clears what the killed saves left.
    const Run resumed = run(train_cmd(tmp.path, " --init_from=resume --eval_interval=1 --max_iters=" +
                                                    std::to_string(last_iter + 2)));
    INFO(resumed.output);
    CHECK(resumed.status == 0);
    CHECK(Checkpoint::load(ck).progress.iter_num == last_iter + 2);
    for (const auto& e : fs::directory_iterator(tmp.path / "out"))
        CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
}

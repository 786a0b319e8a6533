// A time-budgeted run (train --time_budget): the clock decides how many iterations are planned
// and where training stops, and nothing else. So a budgeted run must be, bit for bit, the
// --max_iters run it planned, cut at the iteration where the clock stopped it. Also: the
// training presets, and the flag mistakes a budget invites.
#include <catch2/catch.hpp>

#include <cstring>
#include <regex>
#include <string>

#include "lib/checkpoint.h"
#include "lib/trainer.h"
#include "tests/app_runner.h"

using namespace hg;
using namespace hg::test;

static std::string corpus() {
    std::string s;
    for (int i = 0; i < 80; i++) s += "Now is the winter of our discontent made glorious summer by this sun of York.\n";
    return s;
}

static const std::string kTiny = " --n_layer=1 --n_head=2 --n_embd=16 --block_size=16 --batch_size=4 --eval_iters=2 --threads=1 --warmup_iters=3";

// The number after the last match of `pattern` in `text`.
static int number_after(const std::string& text, const std::string& pattern) {
    const std::regex re(pattern + "([0-9]+)");
    int value = -1;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
        value = std::stoi((*it)[1]);
    INFO(text);
    REQUIRE(value >= 0);
    return value;
}

// What follows `pattern` in `text`, up to the end of that line.
static std::string rest_of_line(const std::string& text, const std::string& pattern) {
    const size_t at = text.find(pattern);
    INFO(text);
    REQUIRE(at != std::string::npos);
    const size_t from = at + pattern.size();
    return text.substr(from, text.find('\n', from) - from);
}

TEST_CASE("a time-budgeted run is the --max_iters run it planned, cut where the clock stopped", "[apps][budget]") {
    TempDir tmp("handgrad-budget");
    const std::string data = write_file(tmp.path / "data.txt", corpus());
    const std::string a = (tmp.path / "a").string(), b = (tmp.path / "b").string();
    const std::string common = bin("train") + kTiny + " --data=" + data + " --eval_interval=1000000 --dropout=0.1";
    // A warmup of 30 steps: the run plans once from timed steps, again at the warmup's end, and
    // again each tenth of the budget (re-plans that move the end of the decay).
    Run budgeted = run(common + " --time_budget=1.5 --warmup_iters=30 --out_dir=" + a);
    INFO(budgeted.output);
    REQUIRE(budgeted.status == 0);
    CHECK(budgeted.output.find("end of warmup") != std::string::npos);
    CHECK(budgeted.output.find("plan 10 %") != std::string::npos);
    const int planned = number_after(budgeted.output, "now: ");
    const int warmup = number_after(budgeted.output, "planned, warmup ");
    CHECK(planned >= 30);
    CHECK(warmup == 30);
    const std::string replay = rest_of_line(budgeted.output, "replay without the clock: ");
    CHECK(replay.find("--lr_replans=") != std::string::npos);
    CHECK(budgeted.output.find("whole val split: loss") != std::string::npos);
    Checkpoint ca = Checkpoint::load(a + "/ckpt.safetensors");
    const int done = ca.progress.iter_num;
    CHECK(done > 0);
    CHECK(done <= planned);
    CHECK(replay.find("--max_iters=" + std::to_string(done) + " ") != std::string::npos);
    // The same schedule and re-plans, stopped after `done`, with no clock at all.
    Run plain = run(common + " " + replay + " --out_dir=" + b);
    INFO(plain.output);
    REQUIRE(plain.status == 0);
    CHECK(plain.output.find("time budget") == std::string::npos);
    Checkpoint cb = Checkpoint::load(b + "/ckpt.safetensors");
    REQUIRE(cb.progress.iter_num == done);
    CHECK(check_same_tensors(a + "/ckpt.safetensors", b + "/ckpt.safetensors") > 10);
}

TEST_CASE("budget flags: mistakes get one clear line", "[apps][budget][errors]") {
    TempDir tmp("handgrad-budget");
    const std::string data = write_file(tmp.path / "data.txt", corpus());
    const std::string base = bin("train") + kTiny + " --data=" + data + " --out_dir=" + (tmp.path / "out").string();
    expect_error(run(base + " --time_budget=-5"), "time_budget");
    expect_error(run(base + " --time_budget=nan"), "time_budget");
    expect_error(run(base + " --time_budget=60 --max_iters=10"), "not both");
    expect_error(run(base + " --time_budget=60 --init_from=resume"), "fresh run");
    expect_error(run(base + " --time_budget=1e-9"), "fits no training step");
}

TEST_CASE("presets set the training recipe too; explicit flags win", "[apps][budget][presets]") {
    const TrainConfig course = train_preset("course"), baby = train_preset("shakespeare-char"),
                      speed = train_preset("speedrun");
    CHECK(course.batch_size == 12);
    CHECK(course.time_budget == 0);
    CHECK(baby.batch_size == 64);  // nanoGPT's train_shakespeare_char.py
    CHECK(baby.max_iters == 5000);
    CHECK(baby.schedule.min_lr == Approx(baby.schedule.learning_rate / 10));
    CHECK(speed.time_budget == 600);
    CHECK(speed.schedule.decay == LrDecay::Linear);  // the search's stage 4: linear decay to 0
    CHECK(speed.schedule.min_lr == 0);
    CHECK_NOTHROW(speed.validate());
    CHECK_NOTHROW(baby.validate());

    // An explicit --max_iters turns the speedrun preset's budget off (no clock, no plan).
    TempDir tmp("handgrad-budget");
    const std::string data = write_file(tmp.path / "data.txt", corpus());
    Run r = run(bin("train") + " --preset=speedrun --n_layer=1 --n_embd=16 --n_head=2 --block_size=16 --threads=1 "
                "--eval_iters=1 --max_iters=2 --data=" + data + " --out_dir=" + (tmp.path / "out").string());
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(r.output.find("time budget") == std::string::npos);
    CHECK(r.output.find("tokens per iteration") != std::string::npos);
    CHECK(r.output.find(std::to_string(train_preset("speedrun").batch_size * 16) + " tokens per iteration") !=
          std::string::npos);
}

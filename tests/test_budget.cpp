// A time-budgeted run (train --time_budget): the clock decides how many iterations are planned
// and where training stops, and nothing else. So a budgeted run must be, bit for bit, the
// --max_iters run it planned, cut at the iteration where the clock stopped it. The controller
// (lib/train/budget.h) is driven here with a clock of the test's own; then the app end to end. Also:
// the training presets, and the flag mistakes a budget invites.
#include "tests/catch.h"

#include <cmath>
#include <cstring>
#include <regex>
#include <string>
#include <vector>

#include "lib/checkpoint/checkpoint.h"
#include "lib/data/dataset.h"
#include "lib/kernels/matmul_bf16.h"
#include "lib/text/char_tokenizer.h"
#include "lib/train/budget.h"
#include "lib/train/train_loop.h"
#include "lib/train/trainer.h"
#include "tests/app_runner.h"

using namespace hg;
using namespace hg::test;

static std::string york_text() {
    return corpus(80, "Now is the winter of our discontent made glorious summer by this sun of York.\n");
}

static const std::string kTinyRun = kTiny + " --warmup_iters=3";

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

// A tiny model on the corpus, ready to train with `tc`.
struct TinyTrainer {
    std::string text = york_text();
    Tokenizer tok = Tokenizer::from_text(text);
    std::vector<int> ids = tok.encode(text);
    Split split = split_train_val(ids);
    GPTConfig config;
    Trainer trainer;
    explicit TinyTrainer(const TrainConfig& tc, float dropout = 0) {
        config.vocab_size = tok.size(), config.block_size = 16, config.n_layer = 1, config.n_head = 2;
        config.n_embd = 16, config.dropout = dropout;
        trainer.start(config, tc, tok.vocab, split.train, split.val);
    }
};

TEST_CASE("the budget controller re-plans at the warmup's end and each tenth, and stops on the clock", "[budget]") {
    TrainConfig tc;
    tc.batch_size = 2, tc.time_budget = 16, tc.schedule.warmup_iters = 40;
    TinyTrainer tiny(tc);
    Trainer& tr = tiny.trainer;
    // Planned from a step of 1/128 s, 0.25 s spent timing: 0.98 · 15.75 · 128 = 1975 iterations.
    const BudgetPlan plan{1.0 / 128, 5, 0.25};
    tr.apply_budget_plan(plan);
    CHECK(tr.cfg.max_iters == 1975);
    CHECK(tr.cfg.schedule.lr_decay_iters == 1975);
    CHECK(tr.cfg.schedule.warmup_iters == 40);
    // The machine: 1/128 s per step for the first 20 steps, then 1/64 s, then 1/32 s from step
    // 300, and 1/4 s once 14.5 s are used (after the last re-plan: the clock must stop the run).
    double now = plan.spent;  // the seconds of training the clock reads
    auto step_time = [&](int iter) {
        return now > 14.5 ? 0.25 : iter < 20 ? 1.0 / 128 : iter < 300 ? 1.0 / 64 : 1.0 / 32;
    };
    TimeBudget budget(tr, plan, [&] { return now; });
    std::vector<Replanned> replans;
    std::vector<int> replan_iters;
    std::vector<double> clock_at;  // the clock at the start of each iteration
    while (true) {
        const int iter = tr.progress.iter_num;
        clock_at.push_back(now);
        if (const auto r = budget.replan_if_due()) {
            replans.push_back(*r);
            replan_iters.push_back(iter);
        }
        if (budget.clock_stops()) break;
        REQUIRE(iter < tr.cfg.max_iters);
        tr.progress.iter_num++;  // a step, as far as the budget can tell
        now += step_time(iter);
    }
    // The end of warmup: from the time of its second half alone (steps 20-39 at 1/64 s).
    REQUIRE(replans.size() >= 2);
    CHECK(replans[0].end_of_warmup);
    CHECK(replan_iters[0] == 40);
    CHECK(replans[0].step_seconds == 1.0 / 64);
    CHECK(replans[0].used == 0.25 + 20.0 / 128 + 20.0 / 64);
    CHECK(replans[0].iters == 40 + int(0.98 * (16 - replans[0].used) * 64));
    // Then one re-plan per tenth of the budget, at the first iteration past it, up to 90 %;
    // each from the steps since the previous one, each recorded in the schedule as a Replan.
    REQUIRE(replans.size() == 10);
    REQUIRE(tr.cfg.schedule.replans.size() == 10);
    for (size_t k = 1; k < replans.size(); k++) {
        const int at = replan_iters[k];
        INFO("re-plan " << k << " at iter " << at);
        CHECK_FALSE(replans[k].end_of_warmup);
        CHECK(replans[k].used == clock_at[at]);
        CHECK(clock_at[at] >= 1.6 * k - 1e-9);
        CHECK(clock_at[at - 1] < 1.6 * k - 1e-9);
        const double expected_step = (replans[k].used - replans[k - 1].used) / (at - replan_iters[k - 1]);
        CHECK(replans[k].step_seconds == Approx(expected_step).epsilon(1e-12));
        CHECK(replans[k].iters == at + std::max(1, int(0.98 * (16 - replans[k].used) / replans[k].step_seconds)));
        CHECK(tr.cfg.schedule.replans[k].iter == at);
        CHECK(tr.cfg.schedule.replans[k].end == replans[k].iters);
    }
    CHECK(tr.cfg.max_iters == replans.back().iters);
    // The stop: before the first step that, at the last re-plan's step time, would overrun.
    const int stopped = tr.progress.iter_num;
    CHECK(budget.step_estimate == replans.back().step_seconds);
    CHECK(clock_at[stopped] + budget.step_estimate > 16);
    CHECK(clock_at[stopped - 1] + budget.step_estimate <= 16);
    CHECK(stopped < tr.cfg.max_iters);  // the plan would have gone further at the old speed
    CHECK_NOTHROW(validate(tr.cfg.schedule));

    SECTION("without a budget nothing is re-planned and the clock stops nothing") {
        TrainConfig plain;
        plain.batch_size = 2, plain.max_iters = 50;
        TinyTrainer other(plain);
        double t = 0;
        TimeBudget none(other.trainer, BudgetPlan{}, [&] { return t; });
        for (int i = 0; i < 50; i++, other.trainer.progress.iter_num++, t += 1e6) {
            CHECK_FALSE(none.replan_if_due());
            CHECK_FALSE(none.clock_stops());
        }
        CHECK(other.trainer.cfg.max_iters == 50);
    }
}

TEST_CASE("a short warmup is never re-planned inside, however much of the budget the planning used", "[budget]") {
    TrainConfig tc;
    tc.batch_size = 2, tc.time_budget = 2, tc.schedule.warmup_iters = 4;  // too short to time: no end-of-warmup plan
    TinyTrainer tiny(tc);
    Trainer& tr = tiny.trainer;
    // Timing the plan took a fifth of the budget, so the first tenth is past before step 0.
    const BudgetPlan plan{0.05, 5, 0.4};
    tr.apply_budget_plan(plan);
    double now = plan.spent;
    TimeBudget budget(tr, plan, [&] { return now; });
    std::vector<int> replan_iters;
    for (int iter = 0; iter < 12; iter++, tr.progress.iter_num++, now += 0.05)
        if (budget.replan_if_due()) replan_iters.push_back(iter);
    REQUIRE_FALSE(replan_iters.empty());
    CHECK(replan_iters.front() == 4);  // the first iteration after the warmup
    CHECK_NOTHROW(validate(tr.cfg.schedule));
}

TEST_CASE("a budgeted run on a clock of its own stops where the clock says, and replays without it",
          "[budget][train]") {
    TrainConfig tc;
    tc.batch_size = 2, tc.time_budget = 1, tc.schedule.warmup_iters = 20, tc.eval_interval = 25, tc.eval_iters = 2;
    TinyTrainer tiny(tc, 0.1f);
    Trainer& tr = tiny.trainer;
    TempDir tmp("handgrad-budget");
    const BudgetPlan plan{0.01, 5, 0.05};  // planned for 10 ms steps: 0.98 · 0.95 / 0.01 = 93 iterations
    tr.apply_budget_plan(plan);
    REQUIRE(tr.cfg.max_iters == 93);
    // The clock, by iteration: 10 ms steps for the first 30, then 12 ms, and 30 ms once 0.92 s
    // of training are used (after the last re-plan); evaluating takes no time.
    std::vector<double> times{0};
    for (int i = 0; i < 1000; i++)
        times.push_back(times.back() + (i < 30 ? 0.01 : plan.spent + times.back() < 0.92 ? 0.012 : 0.03));
    RunSettings settings;
    settings.ckpt_path = (tmp.path / "a.safetensors").string();
    settings.clock = [&] { return times.at(tr.progress.iter_num); };
    struct Log : RunObserver {
        std::vector<Replanned> replans;
        std::vector<int> evals;
        void replanned(const Replanned& r) override { replans.push_back(r); }
        void evaluated(int iter, double, double) override { evals.push_back(iter); }
    } log;
    const RunResult run = run_training(tr, plan, settings, log);
    const int done = tr.progress.iter_num;
    CHECK(run.clock_stopped);
    CHECK_FALSE(run.interrupted);
    CHECK(done < tr.cfg.max_iters);
    REQUIRE(log.replans.size() >= 2);
    CHECK(log.replans[0].end_of_warmup);
    // Stopped before the first step that would overrun at the last re-plan's step time.
    const double estimate = log.replans.back().step_seconds;
    CHECK(plan.spent + times[done] + estimate > 1.0);
    CHECK(plan.spent + times[done - 1] + estimate <= 1.0);
    CHECK(run.train_seconds == plan.spent + times[done]);
    CHECK(run.eval_seconds == 0);
    CHECK(log.evals.front() == 0);
    CHECK(log.evals.back() == done);
    // The replay: the same schedule and re-plans, stopped after `done`, no clock: the same bits.
    TinyTrainer again(tc, 0.1f);
    again.trainer.cfg.max_iters = done;
    again.trainer.cfg.schedule = tr.cfg.schedule;
    again.trainer.cfg.time_budget = 0;
    RunSettings plain;
    plain.ckpt_path = (tmp.path / "b.safetensors").string();
    RunObserver quiet;
    const RunResult replayed = run_training(again.trainer, BudgetPlan{}, plain, quiet);
    CHECK_FALSE(replayed.clock_stopped);
    REQUIRE(again.trainer.progress.iter_num == done);
    CHECK(check_same_tensors(settings.ckpt_path, plain.ckpt_path) > 10);
    CHECK(replay_flags(tr.cfg, done) ==
          fmt::format("--max_iters={} --lr_decay_iters={} --warmup_iters=20 --lr_replans={} "
                      "--time_budget=0",
                      done, 93, to_string(tr.cfg.schedule.replans)));
}

TEST_CASE("a time-budgeted run is the --max_iters run it planned, cut where the clock stopped", "[apps][budget]") {
    TempDir tmp("handgrad-budget");
    const std::string data = write_file(tmp.path / "data.txt", york_text());
    const std::string a = (tmp.path / "a").string(), b = (tmp.path / "b").string();
    const std::string common = bin("train") + kTinyRun + " --data=" + data + " --eval_interval=1000000 --dropout=0.1";
    // A warmup of 30 steps: the run plans once from timed steps, again at the warmup's end, and
    // again each tenth of the budget (re-plans that move the end of the decay).
    Run budgeted = run(common + " --time_budget=1.5 --warmup_iters=30 --out_dir=" + a);
    INFO(budgeted.output);
    REQUIRE(budgeted.status == 0);
    CHECK(budgeted.output.find("end of warmup") != std::string::npos);
    // A re-plan past the first tenth: it prints the share of the budget used when it ran, which
    // is 10 % or a little more, as the clock had it (a slow machine ends a tenth mid-step).
    CHECK(std::regex_search(budgeted.output, std::regex(R"(plan [0-9]+ %: )")));
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
    const std::string data = write_file(tmp.path / "data.txt", york_text());
    const std::string base = bin("train") + kTinyRun + " --data=" + data + " --out_dir=" + (tmp.path / "out").string();
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
    // speedrun: today's block with Muon for the blocks' matrices; speedrun-classic: the recipe
    // before it (GPT-2's block, AdamW alone), kept reproducible
    const TrainConfig classic = train_preset("speedrun-classic");
    CHECK(speed.optimizer == OptimizerKind::Muon);
    CHECK(speed.muon.lr > speed.schedule.learning_rate);
    CHECK(classic.optimizer == OptimizerKind::AdamW);
    CHECK(classic.time_budget == 600);
    CHECK(classic.schedule.learning_rate == speed.schedule.learning_rate);
    const GPTConfig modern = preset("speedrun"), gpt2_block = preset("speedrun-classic");
    CHECK(modern.norm == NormKind::RMSNorm);
    CHECK(modern.pos == PosEncoding::Rope);
    CHECK(modern.mlp == MlpKind::SwiGLU);
    CHECK(modern.qk_norm);
    CHECK(gpt2_block.norm == NormKind::LayerNorm);
    CHECK(gpt2_block.mlp == MlpKind::Gelu);
    CHECK(gpt2_block.gelu == GeluKind::Tanh);
    CHECK(modern.block_size == gpt2_block.block_size);
    // speedrun-float32: the speedrun's recipe in float, on the model before it grew (192 wide
    // with dropout; 128 wide as speedrun-classic, none); speedrun itself in bf16 on every CPU,
    // whatever runs its bf16 products (the same preset with them widened to float)
    const TrainConfig f32 = train_preset("speedrun-float32");
    CHECK(f32.dtype == DType::Float32);
    CHECK(classic.dtype == DType::Float32);
    CHECK(speed.dtype == DType::BFloat16);
    matmul_bf16_force_widen(true);
    CHECK(train_config_to_json(train_preset("speedrun")) == train_config_to_json(speed));
    matmul_bf16_force_widen(false);
    CHECK(f32.optimizer == speed.optimizer);
    CHECK(f32.muon.lr == speed.muon.lr);
    CHECK(train_config_to_json(f32) == train_config_to_json([&] {
              TrainConfig t = speed;
              t.dtype = DType::Float32;
              return t;
          }()));
    const GPTConfig narrow = preset("speedrun-float32");
    CHECK(modern.n_embd == 192);
    CHECK(modern.dropout > 0);
    CHECK(narrow.n_embd == gpt2_block.n_embd);
    CHECK(narrow.dropout == 0);
    CHECK(config_to_json([&] {
              GPTConfig m = modern;
              m.n_embd = narrow.n_embd, m.n_head = narrow.n_head, m.dropout = narrow.dropout;
              return m;
          }()) == config_to_json(narrow));

    // An explicit --max_iters turns the speedrun preset's budget off (no clock, no plan).
    TempDir tmp("handgrad-budget");
    const std::string data = write_file(tmp.path / "data.txt", york_text());
    Run r = run(bin("train") + " --preset=speedrun --n_layer=1 --n_embd=16 --n_head=2 --block_size=16 --threads=1 "
                "--eval_iters=1 --max_iters=2 --data=" + data + " --out_dir=" + (tmp.path / "out").string());
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(r.output.find("time budget") == std::string::npos);
    CHECK(r.output.find("tokens per iteration") != std::string::npos);
    CHECK(r.output.find(std::to_string(train_preset("speedrun").batch_size * 16) + " tokens per iteration") !=
          std::string::npos);
}

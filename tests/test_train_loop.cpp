// The training loop's policy (lib/train/train_loop.h), driven in-process: when it evaluates, saves,
// logs and stops, on an interrupt and on a non-finite loss.
#include "tests/catch.h"

#include <cmath>
#include <string>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/text/char_tokenizer.h"
#include "lib/train/train_loop.h"
#include "tests/app_runner.h"

using namespace hg;
using namespace hg::test;

namespace {

struct Tiny {
    std::string text;
    Tokenizer tok;
    std::vector<int> ids;
    Split split;
    GPTConfig config;
    Trainer trainer;
    explicit Tiny(const TrainConfig& tc) {
        for (int i = 0; i < 60; i++) text += "all the world's a stage, and all the men and women merely players.\n";
        tok = Tokenizer::from_text(text);
        ids = tok.encode(text);
        split = split_train_val(ids);
        config.vocab_size = tok.size();
        config.block_size = 16;
        config.n_layer = 1;
        config.n_head = 2;
        config.n_embd = 16;
        trainer.start(config, tc, tok.vocab, split.train, split.val);
    }
};

// Every report, in order, as "kind iter".
struct Recorder : RunObserver {
    std::vector<std::string> events;
    std::vector<double> val_losses;
    void replanned(const Replanned&) override { events.push_back("replan"); }
    void evaluated(int iter, double, double val) override {
        events.push_back("eval " + std::to_string(iter));
        val_losses.push_back(val);
    }
    void saved(int iter) override { events.push_back("save " + std::to_string(iter)); }
    void interrupted(int iter) override { events.push_back("interrupted " + std::to_string(iter)); }
    void logged(int iter, const StepResult& r, double ms) override {
        events.push_back("log " + std::to_string(iter));
        CHECK(std::isfinite(r.loss));
        CHECK(ms >= 0);
    }
};

TrainConfig tiny_recipe() {
    TrainConfig tc;
    tc.batch_size = 2, tc.max_iters = 7, tc.eval_interval = 3, tc.eval_iters = 2, tc.log_interval = 2;
    tc.schedule = LrSchedule{1e-3, 1e-4, 2, 7, true};
    return tc;
}

}  // namespace

TEST_CASE("the loop evaluates every eval_interval and at the end, saves on a best val loss, logs every log_interval",
          "[train][loop]") {
    Tiny tiny(tiny_recipe());
    TempDir tmp("handgrad-loop");
    RunSettings settings;
    settings.ckpt_path = (tmp.path / "ckpt.safetensors").string();
    settings.always_save_checkpoint = false;
    Recorder rec;
    const RunResult run = run_training(tiny.trainer, BudgetPlan{}, settings, rec);
    CHECK(run.first_iter == 0);
    CHECK_FALSE(run.clock_stopped);
    CHECK_FALSE(run.interrupted);
    CHECK(tiny.trainer.progress.iter_num == 7);
    // Evaluations at 0, 3, 6 and the last, 7; a save after each one that beat every earlier val
    // loss, and always at the last; never at the start (there is nothing new to save).
    REQUIRE(rec.val_losses.size() == 4);
    std::vector<std::string> expected;
    double best = 1e9;
    const int evals[] = {0, 3, 6, 7};
    for (int k = 0; k < 4; k++) {
        const int iter = evals[k];
        if (k > 0) {  // the log lines of the steps before this evaluation: (iter + 1) % 2 == 0, and iter 6 (the last)
            for (int i = evals[k - 1]; i < iter; i++)
                if ((i + 1) % 2 == 0 || i == 6) expected.push_back("log " + std::to_string(i));
        }
        expected.push_back("eval " + std::to_string(iter));
        const bool is_best = rec.val_losses[k] < best;
        if (is_best) best = rec.val_losses[k];
        if (iter > 0 && (is_best || iter == 7)) expected.push_back("save " + std::to_string(iter));
    }
    CHECK(rec.events == expected);
    const Checkpoint ck = Checkpoint::load(settings.ckpt_path);
    CHECK(ck.progress.iter_num == 7);
    CHECK(ck.progress.best_val_loss == best);
    // The checkpoint records the training config (and the caller's run_info beside it).
    CHECK(train_config_from_json(ck.progress.train_config).max_iters == 7);

    SECTION(
        "always_save_checkpoint saves at every evaluation after the start; a resumed run goes on from its iteration") {
        Tiny again(tiny_recipe());
        again.trainer.run_info = R"({"data": "the corpus"})";
        settings.always_save_checkpoint = true;
        Recorder all;
        run_training(again.trainer, BudgetPlan{}, settings, all);
        int saves = 0;
        for (const std::string& e : all.events) saves += e.rfind("save ", 0) == 0;
        CHECK(saves == 3);  // at 3, 6 and 7
        const Checkpoint saved = Checkpoint::load(settings.ckpt_path);
        CHECK(saved.progress.train_config.find("\"data\":\"the corpus\"") != std::string::npos);
        Trainer resumed;
        TrainConfig longer = tiny_recipe();
        longer.max_iters = 9;
        resumed.resume(saved, longer, again.split.train, again.split.val);
        Recorder more;
        const RunResult r = run_training(resumed, BudgetPlan{}, settings, more);
        CHECK(r.first_iter == 7);
        CHECK(more.events == std::vector<std::string>{"log 7", "log 8", "eval 9", "save 9"});  // 7 is no eval_interval
    }
}

TEST_CASE("an interrupt saves and ends the run; a non-finite loss ends it and saves nothing", "[train][loop]") {
    TempDir tmp("handgrad-loop");
    RunSettings settings;
    settings.ckpt_path = (tmp.path / "ckpt.safetensors").string();
    TrainConfig tc = tiny_recipe();
    tc.max_iters = 100, tc.eval_interval = 1000;
    Tiny tiny(tc);
    settings.interrupted = [&] { return tiny.trainer.progress.iter_num == 4; };
    Recorder rec;
    const RunResult run = run_training(tiny.trainer, BudgetPlan{}, settings, rec);
    CHECK(run.interrupted);
    CHECK(rec.events.back() == "interrupted 4");
    CHECK(Checkpoint::load(settings.ckpt_path).progress.iter_num == 4);
    const std::string before = read_bytes(settings.ckpt_path);

    // Weights gone to NaN: the first step's loss is NaN; the run stops with one clear message.
    float* w = tiny.trainer.model.params_memory.data();
    for (size_t i = 0; i < tiny.trainer.model.num_parameters; i++) w[i] = NAN;
    settings.interrupted = nullptr;
    Recorder nan_run;
    REQUIRE_THROWS_WITH(run_training(tiny.trainer, BudgetPlan{}, settings, nan_run),
                        Catch::Contains("loss is nan at iter 4") && Catch::Contains("untouched"));
    CHECK(tiny.trainer.progress.iter_num == 4);
    CHECK(read_bytes(settings.ckpt_path) == before);
    CHECK(nan_run.events.empty());  // no evaluation at 4 (not an eval_interval), no log line, no save
}

TEST_CASE("an interrupt during an evaluation cuts it short, saves, and ends the run", "[train][loop]") {
    TempDir tmp("handgrad-loop");
    RunSettings settings;
    settings.ckpt_path = (tmp.path / "ckpt.safetensors").string();
    TrainConfig tc = tiny_recipe();
    tc.max_iters = 10, tc.eval_interval = 5, tc.eval_iters = 100000;  // an evaluation of 2 × 100,000 batches
    Tiny tiny(tc);
    // Before each step and each evaluation batch; the first evaluation (at iter 0) asks first.
    int asked = 0;
    settings.interrupted = [&] { return ++asked == 3; };
    Recorder rec;
    const RunResult run = run_training(tiny.trainer, BudgetPlan{}, settings, rec);
    CHECK(run.interrupted);
    CHECK(asked == 3);  // two batches evaluated, the third never started
    CHECK(rec.events == std::vector<std::string>{"interrupted 0"});
    CHECK(Checkpoint::load(settings.ckpt_path).progress.iter_num == 0);
}

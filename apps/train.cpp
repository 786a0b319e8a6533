// train — nanoGPT's train.py in C++: train a GPT on a text file, evaluate, checkpoint, resume.
//
//   build/train                                  # the course model on tiny Shakespeare
//   build/train --preset=shakespeare-char --batch_size=64 --max_iters=5000
//   build/train --init_from=resume --max_iters=4000
//   build/train --tokenizer=gpt2 --preset=shakespeare-char   # GPT-2's BPE instead of characters
//   build/train --preset=finetune-shakespeare --init_from=gpt2.safetensors   # fine-tune converted weights
//   mpirun -np 2 build/train --batch_size=6      # data-parallel: 2 ranks × 6 rows (make train-mpi)
//
// Prints a line per log_interval and train/val losses per eval_interval; writes
// out_dir/ckpt.safetensors (atomically) and out_dir/log.csv, holding out_dir/train.lock all the
// while (one run per out_dir: lib/process/run_lock.h). Ctrl-C, SIGTERM, SIGHUP, SIGUSR1 or SIGUSR2
// finishes the step, saves, and exits (lib/process/stop_signal.h); a non-finite loss stops without
// touching the last good checkpoint; a run the memory cannot hold is refused before it
// allocates (lib/model/memory_check.h). When to do each of these is lib/train/train_loop.h's; this program
// reads the flags, sets the run up, and prints what the run reports.
//
// Under mpirun (an MPI build, see lib/process/dist.h) every rank runs this same loop in lockstep; rank 0
// alone prints, logs and writes checkpoints. An error on any rank ends the whole job at once
// (MPI_Abort) rather than leaving the other ranks waiting in a collective forever.
#include <omp.h>
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "apps/flags.h"
#include "apps/train_flags.h"
#include "lib/checkpoint/atomic_file.h"
#include "lib/data/dataset.h"
#include "lib/data/shards.h"
#include "lib/kernels/matmul_bf16.h"
#include "lib/kernels/simd.h"
#include "lib/model/memory_check.h"
#include "lib/process/dist.h"
#include "lib/process/heap.h"
#include "lib/process/run_lock.h"
#include "lib/process/stop_signal.h"
#include "lib/text/char_tokenizer.h"
#include "lib/text/text_file.h"
#include "lib/text/tokenizer_by_name.h"
#include "lib/train/batch_threads.h"
#include "lib/train/evaluate.h"
#include "lib/train/train_loop.h"

using namespace hg;
namespace fs = std::filesystem;

// How a plan reads (the first and each re-plan), with the flags that rerun it without a clock.
static void print_plan(const TrainConfig& c, const std::string& what) {
    fmt::print("{}: {} iterations planned, warmup {}, {} to min_lr at {} ({} reproduces this plan bit for bit)\n",
               what, c.max_iters, c.schedule.warmup_iters, to_string(c.schedule.decay), c.max_iters,
               replay_flags(c, c.max_iters));
}

// Tokens of one iteration, over every rank and micro-batch.
static int64_t tokens_per_iter(const Trainer& t) {
    return int64_t(t.dist.size) * t.cfg.batch_size * t.cfg.gradient_accumulation_steps * t.model.config.block_size;
}

// The run's reports as lines on stdout and rows in log.csv (the other ranks' go to /dev/null).
struct Printer : RunObserver {
    const Trainer& trainer;
    FILE* csv;
    std::string ckpt_path;
    Printer(const Trainer& t, FILE* f, std::string path) : trainer(t), csv(f), ckpt_path(std::move(path)) {}

    void replanned(const Replanned& r) override {
        const std::string when = r.end_of_warmup ? std::string("end of warmup")
                                                 : fmt::format("plan {:.0f} %", 100 * r.used / trainer.cfg.time_budget);
        print_plan(trainer.cfg, fmt::format("{}: {:.1f} s used, steps take {:.1f} ms now", when, r.used,
                                            1000 * r.step_seconds));
    }
    void evaluated(int iter, double train_loss, double val_loss) override {
        fmt::print("step {}: train loss {:.4f}, val loss {:.4f}\n", iter, train_loss, val_loss);
        std::fprintf(csv, "eval,%d,%.6f,%.6f,,,\n", iter, train_loss, val_loss);
        std::fflush(csv);
    }
    void saved(int) override { fmt::print("saved checkpoint to {}\n", ckpt_path); }
    void interrupted(int iter) override {
        const std::string by = *stop_signal_name() ? stop_signal_name() : "a signal to another rank";
        fmt::print("interrupted by {}: saved checkpoint at iter {} to {}\n", by, iter, ckpt_path);
    }
    void logged(int iter, const StepResult& r, double ms) override {
        const double tok_s = tokens_per_iter(trainer) / (ms / 1000);
        const double eta = ms / 1000 * (trainer.cfg.max_iters - iter - 1);
        fmt::print("iter {}: loss {:.4f}, lr {:.2e}, norm {:.3f}, {:.1f} ms/iter, {:.0f} tok/s, ETA {:.0f} s\n", iter,
                   r.loss, r.lr, r.grad_norm, ms, tok_s, eta);
        std::fprintf(csv, "train,%d,%.6f,,%.6g,%.3f,%.0f\n", iter, r.loss, r.lr, ms, tok_s);
    }
};

// What a run trains on: the model's config, the tokens, and for a resumed or fine-tuned run its
// checkpoint.
struct RunData {
    std::optional<Checkpoint> ck;
    bool resume = false;  // ck is out_dir's, to resume; otherwise (if any) the weights to start from
    std::unique_ptr<TextTokenizer> tok;
    GPTConfig config;
    Split split;                     // a text's tokens, in memory
    std::optional<TokenData> files;  // or token files, read from disk (lib/data/shards.h)
    TokenView train, val;            // the splits, either way
    std::vector<std::string> vocab;
};

static RunData load_run_data(const TrainFlags& f, const ModelFlags& model, const std::string& ckpt_path) {
    RunData d;
    if (is_token_data_path(f.data)) d.files.emplace(open_token_data(f.data));
    const std::string text = d.files ? std::string() : read_text_file(f.data);
    if (f.init_from == "scratch") {
        d.config = model.config();
        const std::string name = !f.tokenizer.name.empty() ? f.tokenizer.name
                                 : d.files                 ? d.files->tokenizer.name
                                                           : "char";
        if (d.files) check_same_tokenizer(*d.files, name, d.files->tokenizer.vocab, "--tokenizer=" + name);
        d.tok = make_tokenizer(name, name != "char" ? std::vector<std::string>{}
                                     : d.files ? d.files->tokenizer.vocab : Tokenizer::from_text(text).vocab,
                               f.tokenizer.gpt2_dir);
        if (model.o_vocab->count())
            check(d.config.vocab_size == d.tok->size(), "--vocab_size={} but the {} tokenizer has {} tokens{}",
                  d.config.vocab_size, name, d.tok->size(),
                  name == "char" ? " (the distinct characters of " + f.data + ")" : "");
        d.config.vocab_size = d.tok->size();
        d.config.validate();
    } else {
        d.resume = f.init_from == "resume";
        check(d.resume || fs::is_regular_file(f.init_from),
              "--init_from={}: no such checkpoint file (scratch | resume | PATH; OpenAI's GPT-2 weights are "
              "converted with tools/convert.py from-hf, docs/gpt2.md)", f.init_from);
        d.ck.emplace(Checkpoint::load(d.resume ? ckpt_path : f.init_from));
        d.config = d.resume ? d.ck->config : model.finetune_config(d.ck->config);
        d.tok = checkpoint_tokenizer(d.ck->tokenizer, d.ck->vocab, f.tokenizer.name, f.tokenizer.gpt2_dir);
    }
    if (d.tok->name() == "char") d.vocab = dynamic_cast<const Tokenizer&>(*d.tok).vocab;
    const int T = d.config.block_size;
    if (d.files) {
        if (d.ck) check_same_tokenizer(*d.files, d.ck->tokenizer, d.ck->vocab, "the checkpoint's model");
        check_windows(*d.files, T);
        d.train = d.files->train.view, d.val = d.files->val.view;
        return d;
    }
    d.split = split_text(text, *d.tok);
    d.train = d.split.train, d.val = d.split.val;
    // Both splits must hold at least one window before any time is spent.
    check(d.split.train.size() > size_t(T) && d.split.val.size() > size_t(T),
          "{}: the train/val splits have {} and {} tokens; block_size {} needs at least {} in each", f.data,
          d.split.train.size(), d.split.val.size(), T, T + 1);
    return d;
}

// `batch_threads_why`: why auto chose the batch threads ("" when a flag gave them).
// `way_why`: why the bf16 products take the way they do (read under bf16 only).
static void print_header(const Trainer& trainer, const RunData& d, int threads, const std::string& batch_threads_why,
                         const std::string& way_why) {
    const GPTConfig& c = trainer.model.config;
    const TrainConfig& tc = trainer.cfg;
    const Dist& dist = trainer.dist;
    fmt::print("model: {} parameters, L={} NH={} C={} block_size={} V={} ({} bias layout, {}, {}, dropout {})\n",
               trainer.model.num_parameters, c.n_layer, c.n_head, c.n_embd, c.block_size, c.vocab_size,
               to_string(c.bias), c.tie_weights ? "tied" : "untied", describe_block(c), c.dropout);
    fmt::print("data: {} tokens of the {} tokenizer ({} train, {} val{}); {} tokens per iteration\n",
               d.train.size() + d.val.size(), d.tok->name(), d.train.size(), d.val.size(),
               d.files ? ", " + d.files->describe() + ", read from disk" : "", tokens_per_iter(trainer));
    fmt::print("threads: {}{}, SIMD: {}\n", threads,
               tc.batch_threads > 1 ? fmt::format(" ({} batch threads of {} rows, a model replica each)",
                                                  tc.batch_threads, tc.batch_size / tc.batch_threads) : "",
               simd_current_target());
    fmt::print("{}", describe_optimizer(trainer.model.table, tc.optimizer, tc.muon, tc.adamw));
    fmt::print("dtype: {}\n", tc.dtype == DType::BFloat16 ? "bfloat16 (products: " + matmul_bf16_describe() + "; " +
                                                                way_why + ")"
                                                          : std::string("float32"));
    fmt::print("attention: {}, recompute: {}\n", to_string(tc.activations.attention),
               to_string(tc.activations.recompute));
    if (!batch_threads_why.empty()) fmt::print("batch threads: {} (auto: {})\n", tc.batch_threads, batch_threads_why);
    if (dist.size > 1)
        fmt::print("ranks: {} ({} on this host) × {} threads; effective batch {} = {} ranks × {} × {} steps\n",
                   dist.size, dist.local_size, threads, dist.size * tc.batch_size * tc.gradient_accumulation_steps,
                   dist.size, tc.batch_size, tc.gradient_accumulation_steps);
}

// out_dir/run.toml: every flag with the value this run runs with (apps/config_file.h). A run
// from a checkpoint takes its model from it: of the model flags only block_size and dropout.
static void write_run_file(const CLI::App& app, const Trainer& t, const TrainFlags& f, const RunData& d, int threads) {
    std::map<std::string, std::string> values = train_flag_values(t.cfg);
    std::set<std::string> omit{"bias"};  // bias_layout says it
    for (const auto& [name, value] : model_flag_values(t.model.config)) {
        if (f.init_from == "scratch" || name == "block_size" || name == "dropout") values[name] = value;
        else omit.insert(name);
    }
    values["tokenizer"] = d.tok->name(), values["threads"] = std::to_string(threads);
    values["matmul"] = to_string(matmul_current());  // what auto chose: a replay must not choose again
    if (t.cfg.dtype == DType::BFloat16) values["matmul_bf16"] = to_string(matmul_bf16_backend());
    if (t.cfg.time_budget > 0) omit.insert({"max_iters", "lr_decay_iters"});  // the clock plans them
    write_run_config(app, (fs::path(f.out_dir) / "run.toml").string(), values, omit);
}

static void print_summary(Trainer& trainer, const RunResult& run, const BudgetPlan& plan, const RunData& d) {
    const TrainConfig& tc = trainer.cfg;
    const int iters = trainer.progress.iter_num - run.first_iter;
    if (run.clock_stopped)
        fmt::print("the time budget ran out at iter {} of the {} planned\n", trainer.progress.iter_num, tc.max_iters);
    if (tc.time_budget > 0) fmt::print("replay without the clock: {}\n", replay_flags(tc, trainer.progress.iter_num));
    if (tc.time_budget > 0 && iters > 0)
        fmt::print("steps took {:.1f} ms each on average (planned for {:.1f})\n",
                   1000 * (run.train_seconds - plan.spent) / iters, 1000 * plan.step_seconds);
    fmt::print("done: {} iterations in {:.1f} s ({:.1f} s of training, {:.1f} s evaluating and saving)\n", iters,
               run.wall_seconds, run.train_seconds, run.eval_seconds);
    if (tc.time_budget > 0) {  // the number a budgeted run is judged by: build/eval's, on the whole val split
        const double t0 = steady_seconds();
        WindowLoss w = windowed_loss(trainer.model, d.val);
        count_scored_characters(w, d.val, *d.tok);
        fmt::print("whole val split: loss {:.4f} nats/token, {:.4f} bits/char over {} tokens ({} windows of {}; "
                   "{:.1f} s)\n", w.loss, w.bits_per_char(), w.tokens, w.windows, w.T, steady_seconds() - t0);
    }
    if (trainer.dist.size > 1)
        fmt::print("allreduce: {:.2f} s on rank 0 ({} floats = {:.1f} MB per step)\n", trainer.comm_seconds,
                   trainer.model.num_parameters, 4e-6 * double(trainer.model.num_parameters));
}

int main(int argc, char** argv) {
    CLI::App app{"handgrad train: train a GPT on a text file (nanoGPT's flags)"};
    ModelFlags model;
    model.add(app);
    TrainFlags flags(preset_in_args(argc, argv));  // --preset first: the other defaults depend on it
    flags.add(app);

    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines appear at once, even in a log file
    keep_heap_top();                            // lib/process/heap.h
    Dist dist;
    auto train_main = [&]() -> int {
        // Every rank runs all of this in lockstep; only rank 0 speaks (its stdout, its log.csv).
        if (dist.rank != 0)
            check(std::freopen("/dev/null", "w", stdout) != nullptr, "cannot silence rank {}", dist.rank);
        TrainConfig tc = flags.config();
        // N ranks on one host share its cores: by default each takes cores / N threads.
        int threads = flags.threads;
        if (threads == 0 && dist.local_size > 1 && !std::getenv("OMP_NUM_THREADS"))
            threads = std::max(1, int(std::thread::hardware_concurrency()) / dist.local_size);
        if (threads > 0) omp_set_num_threads(threads);
        threads = omp_get_max_threads();
        openblas_set_num_threads(threads);

        const std::string ckpt_path = (fs::path(flags.out_dir) / "ckpt.safetensors").string();
        std::optional<RunLock> lock;  // rank 0 writes out_dir, and holds it until the run ends
        if (dist.rank == 0) {
            lock.emplace(flags.out_dir);
            if (const int n = remove_unfinished_saves(ckpt_path))
                fmt::print("removed {} unfinished save(s) of {} (a run killed while saving)\n", n, ckpt_path);
            remove_unfinished_saves((fs::path(flags.out_dir) / "run.toml").string());  // a run killed while writing it
        }
        const RunData d = load_run_data(flags, model, ckpt_path);
        // With --batch_threads=auto, tc.batch_threads is 1 here: one model must fit, and auto
        // considers only the replicas that fit too.
        check_memory_available(memory_need(d.config, tc.batch_size, d.config.block_size, tc.batch_threads, 3,
                                           tc.dtype == DType::BFloat16, tc.activations));
        // The backend and the batch threads (and under bf16 the way of its bf16 products), chosen
        // together: each one's speed depends on the others.
        StepSetupFlags setup_flags;
        setup_flags.matmul = flags.matmul.value, setup_flags.batch_threads = parse_batch_threads(flags.batch_threads);
        setup_flags.matmul_bf16 = flags.matmul_bf16;
        setup_flags.memory_bytes = available_memory_bytes(), setup_flags.resumed = d.resume ? &*d.ck : nullptr;
        const StepSetup setup = choose_step_setup(d.config, tc, threads, d.train, setup_flags, dist);
        matmul_use(setup.backend);
        matmul_bf16_use(setup.way);
        tc.batch_threads = setup.batch_threads;
        Trainer trainer;
        trainer.dist = dist;
        if (d.resume) {
            trainer.resume(*d.ck, tc, d.train, d.val);
            fmt::print("resuming from {} at iter {}\n", ckpt_path, trainer.progress.iter_num);
        } else if (d.ck) {
            trainer.start_from(*d.ck, d.config, tc, d.train, d.val);
            fmt::print("starting from the weights of {} (fresh optimizer state)\n", flags.init_from);
        } else {
            trainer.tokenizer = d.tok->name();
            trainer.start(d.config, tc, d.vocab, d.train, d.val);
        }
        print_header(trainer, d, threads, setup_flags.batch_threads == 0 ? setup.batch_threads_why : "", setup.way_why);
        fmt::print("matmul: {} ({})\n", to_string(setup.backend), setup.matmul_why);
        if (dist.rank == 0) write_run_file(app, trainer, flags, d, threads);
        BudgetPlan plan;
        if (trainer.cfg.time_budget > 0) {
            plan = trainer.plan_time_budget();
            print_plan(trainer.cfg, fmt::format("time budget {:.0f} s of training; a step takes {:.1f} ms (median of "
                                                "{}, timing took {:.1f} s)", trainer.cfg.time_budget,
                                                1000 * plan.step_seconds, plan.timed_steps, plan.spent));
        }
        // What the checkpoint records of how the run was started: the same for a run and its
        // resumption, so that a resumed run's checkpoint is the straight run's, byte for byte.
        // The split sizes too: resumed on other data, the sampler's state would draw other windows.
        nlohmann::json info{{"data", flags.data}, {"threads", threads}, {"world_size", dist.size},
                            {"train_tokens", d.train.size()}, {"val_tokens", d.val.size()},
                            {"matmul", to_string(matmul_current())}};
        if (tc.dtype == DType::BFloat16) info["matmul_bf16"] = to_string(matmul_bf16_backend());
        trainer.run_info = info.dump();
        if (d.resume) {
            const nlohmann::json was = nlohmann::json::parse(d.ck->progress.train_config, nullptr, false);
            check(
                !was.contains("train_tokens") ||
                    (was["train_tokens"] == d.train.size() && was["val_tokens"] == d.val.size()),
                "the checkpoint was trained on {} train and {} val tokens; --data={} has {} and {}: resumed, it would "
                "read other batches",
                was.value("train_tokens", 0), was.value("val_tokens", 0), flags.data, d.train.size(), d.val.size());
        }

        const std::string csv_path = (fs::path(flags.out_dir) / "log.csv").string();
        const bool new_csv = flags.init_from != "resume" || !fs::exists(csv_path);
        std::unique_ptr<FILE, int (*)(FILE*)> csv(std::fopen(dist.rank == 0 ? csv_path.c_str() : "/dev/null",
                                                             new_csv ? "w" : "a"), std::fclose);
        check(csv != nullptr, "cannot write {}", csv_path);
        if (new_csv) std::fprintf(csv.get(), "kind,iter,loss,val_loss,lr,ms_per_iter,tokens_per_s\n");
        install_stop_signals();

        RunSettings settings;
        settings.ckpt_path = ckpt_path;
        settings.always_save_checkpoint = flags.always_save_checkpoint;
        settings.interrupted = stop_requested;
        Printer printer(trainer, csv.get(), ckpt_path);
        const RunResult run = run_training(trainer, plan, settings, printer);
        csv.reset();
        print_summary(trainer, run, plan, d);
        return 0;
    };
    return run_app(app, argc, argv, [&] {
        dist = dist_init(&argc, &argv);
        try {
            const int rc = train_main();
            dist_finalize(dist);
            return rc;
        } catch (const std::exception& e) {
            if (!dist.mpi) throw;  // run_app prints it
            // The other ranks may be waiting for this one in a collective: end them all. Most
            // errors (a bad flag value, a missing file) hit every rank alike: the others give
            // rank 0 a moment to say it once and end the job before they would say it too.
            if (dist.rank != 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
            fmt::print(stderr, "error: rank {} of {}: {}\n", dist.rank, dist.size, e.what());
            std::fflush(stderr);
            dist_abort(dist, 1);
        }
    });
}

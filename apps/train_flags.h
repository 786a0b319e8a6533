// train_flags.h — build/train's own flags, on top of the model's (flags.h), with nanoGPT's names.
#pragma once
#include <algorithm>
#include <string>

#include "apps/flags.h"
#include "lib/train/batch_threads.h"
#include "lib/train/train_config.h"

namespace hg {

// train's own flags, on top of the model's (flags.h), and the training config they give.
struct TrainFlags {
    TrainConfig tc, preset_tc;  // a preset sets the training defaults too (train_preset)
    std::string data = "data/tinyshakespeare/input.txt", out_dir = "out-shakespeare-char", init_from = "scratch";
    std::string batch_threads = "auto", lr_decay, lr_replans, optimizer, dtype, attention, recompute;
    std::string matmul_bf16 = "auto";
    TokenizerFlags tokenizer;
    int threads = 0;
    MatmulFlag matmul;
    bool always_save_checkpoint = true;
    CLI::Option *o_decay, *o_min_lr, *o_max_iters, *o_budget, *o_warmup;

    explicit TrainFlags(const std::string& preset) : tc(train_preset(preset)), preset_tc(tc) {
        lr_decay = to_string(tc.schedule.decay);
        optimizer = to_string(tc.optimizer);
        dtype = to_string(tc.dtype);
        attention = to_string(tc.activations.attention), recompute = to_string(tc.activations.recompute);
    }
    void add(CLI::App& app) {
        o_decay = app.add_option("--lr_decay_iters", tc.schedule.lr_decay_iters, "default: max_iters");
        o_min_lr = app.add_option("--min_lr", tc.schedule.min_lr, "default: learning_rate / 10");
        app.add_option("--batch_size", tc.batch_size)->capture_default_str();
        app.add_option("--gradient_accumulation_steps", tc.gradient_accumulation_steps)->capture_default_str();
        app.add_option("--batch_threads", batch_threads,
                       "R threads that each take batch_size / R rows with a replica of the model (1: all threads "
                       "work on every layer; auto: the fastest R dividing the batch that fits in memory, timed at "
                       "start-up with "
                       "the matmul backend)")
            ->capture_default_str();
        o_max_iters = app.add_option("--max_iters", tc.max_iters)->capture_default_str();
        o_budget = app.add_option("--time_budget", tc.time_budget,
                                  "seconds of training (evaluation excluded) over which the lr schedule "
                                  "is laid; 0: train max_iters")->capture_default_str();
        app.add_option("--learning_rate", tc.schedule.learning_rate)->capture_default_str();
        o_warmup = app.add_option("--warmup_iters", tc.schedule.warmup_iters)->capture_default_str();
        app.add_option("--decay_lr", tc.schedule.decay_lr)->capture_default_str();
        app.add_option("--lr_decay", lr_decay, "the decay's shape: cosine (nanoGPT's) | linear | wsd (stable, then "
                       "a 1 - sqrt cooldown over the last cooldown_frac of it)")->capture_default_str();
        app.add_option("--cooldown_frac", tc.schedule.cooldown_frac, "wsd: the fraction of the decay spent cooling "
                       "down, in (0, 1]")->capture_default_str();
        app.add_option("--lr_replans", lr_replans, "ITER:END,...: from ITER on the decay ends at END (a time-budgeted "
                       "run prints these to replay it without the clock)");
        app.add_option("--beta1", tc.adamw.beta1)->capture_default_str();
        app.add_option("--beta2", tc.adamw.beta2)->capture_default_str();
        app.add_option("--weight_decay", tc.adamw.weight_decay)->capture_default_str();
        app.add_option("--eps", tc.adamw.eps, "AdamW's epsilon")->capture_default_str();
        app.add_option("--grad_clip", tc.grad_clip, "0 disables")->capture_default_str();
        app.add_option("--optimizer", optimizer, "adamw | muon (Muon for the blocks' matrices, AdamW for the rest)")
            ->capture_default_str();
        app.add_option("--dtype", dtype, "float32 | bfloat16 (mixed precision: the products' inputs in bf16, "
                       "everything else float; docs/bf16.md)")->capture_default_str();
        app.add_option("--attention", attention,
                       "flash (keeps one number per row) | materialized (keeps the T×T probabilities); the same "
                       "function (docs/attention-memory.md)")
            ->capture_default_str();
        app.add_option("--recompute", recompute,
                       "none | attention | block: what the backward computes again instead of the forward keeping "
                       "it (docs/attention-memory.md)")
            ->capture_default_str();
        app.add_option("--muon_lr", tc.muon.lr, "Muon's peak lr, on the lr schedule; 0: learning_rate")
            ->capture_default_str();
        app.add_option("--muon_momentum", tc.muon.momentum)->capture_default_str();
        app.add_option("--muon_momentum_warmup", tc.muon.momentum_warmup,
                       "steps over which Muon's momentum ramps up from 0.85; 0: none")->capture_default_str();
        app.add_option("--eval_interval", tc.eval_interval)->capture_default_str();
        app.add_option("--eval_iters", tc.eval_iters)->capture_default_str();
        app.add_option("--log_interval", tc.log_interval)->capture_default_str();
        app.add_option("--seed", tc.seed)->capture_default_str();
        app.add_option("--out_dir", out_dir)->capture_default_str();
        app.add_option("--init_from", init_from, "scratch | resume (out_dir's checkpoint) | PATH (a checkpoint's "
                       "weights, fresh optimizer state: fine-tuning)")->capture_default_str();
        tokenizer.add(app, "char from scratch, else the checkpoint's");
        app.add_option("--always_save_checkpoint", always_save_checkpoint,
                       "save at every eval, not only on a new best val loss")->capture_default_str();
        app.add_option("--data", data, "a UTF-8 text file; or token files, read from disk: a directory of "
                       "build/prepare's (llm.c's) shards or nanoGPT's train.bin/val.bin, or a glob of shards "
                       "(docs/data.md)")->capture_default_str();
        matmul.add(app);
        app.add_option("--matmul_bf16", matmul_bf16,
                       "auto | onednn | widen: how the bf16 products run under --dtype=bfloat16 (onednn: its bf16 "
                       "matmul, where the CPU has AVX512_BF16, and flash attention's tiles on the same dot "
                       "products; widen: widened to float, on the --matmul backend; auto: timed with the backend "
                       "and batch threads)")
            ->capture_default_str();
        app.add_option(
            "--threads", threads,
            "threads for OpenBLAS and our loops (default: OMP_NUM_THREADS, else the cores / ranks on this host)");
    }

    // The training config, with nanoGPT's defaults: lr_decay_iters = max_iters, min_lr =
    // learning_rate / 10 (a preset may set another ratio). An explicit --max_iters turns a
    // preset's time budget off, and a preset's warmup is cut to fit a shorter run. batch_threads
    // is left at 1 for auto (choose_step_setup decides once the model and data are known).
    TrainConfig config() const {
        TrainConfig c = tc;
        c.schedule.decay = parse_lr_decay(lr_decay);
        // (a run.toml names every flag, so the default is allowed with any decay)
        check(c.schedule.decay == LrDecay::Wsd || c.schedule.cooldown_frac == LrSchedule{}.cooldown_frac,
              "--cooldown_frac shapes only --lr_decay=wsd (the decay is {})", to_string(c.schedule.decay));
        c.schedule.replans = parse_replans(lr_replans);
        c.optimizer = parse_optimizer(optimizer);
        c.dtype = parse_dtype(dtype);
        c.activations = training_plan(parse_attention(attention), parse_recompute(recompute));
        if (o_max_iters->count() && !o_budget->count()) c.time_budget = 0;
        check(!(o_max_iters->count() && o_budget->count() && c.time_budget > 0),
              "give --max_iters or --time_budget, not both (the budget decides the iterations)");
        if (!o_decay->count()) c.schedule.lr_decay_iters = c.max_iters;
        if (!o_warmup->count()) c.schedule.warmup_iters = std::min(c.schedule.warmup_iters, c.schedule.lr_decay_iters);
        if (!o_min_lr->count())
            c.schedule.min_lr =
                c.schedule.learning_rate * (preset_tc.schedule.min_lr / preset_tc.schedule.learning_rate);
        check(c.time_budget == 0 || init_from != "resume",
              "--time_budget plans a fresh run; resume a budgeted run with the --max_iters=N "
              "--lr_decay_iters=N --warmup_iters=W it printed");
        check_threads(threads, /*zero_is_default=*/true);
        matmul.validate();
        parse_matmul_bf16_flag(matmul_bf16);
        if (parse_batch_threads(batch_threads) > 0) c.batch_threads = parse_batch_threads(batch_threads);
        c.validate();
        return c;
    }
};

}  // namespace hg

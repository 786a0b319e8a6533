// trainer.cpp — the training step, evaluation, and checkpoint round trip (see trainer.h).
#include "lib/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "lib/core/errors.h"
#include "lib/core/parallel.h"
#include "lib/core/profile.h"
#include "lib/data/dataset.h"
#include "lib/kernels/vec.h"
#include "lib/text/tokenizer.h"

namespace hg {

// This rank's B rows of a batch of N·B: the rows a single process drawing N·B rows from `rng`
// would put at [rank·B, (rank+1)·B). sample_batch draws exactly one number per row (lib/data/dataset.h),
// so skipping rank·B draws before and (N-1-rank)·B after leaves every rank's stream in step.
static void sample_rank_rows(int* idx, int* targets, const TokenView& ids, int B, int T, Rng& rng,
                             const Dist& d, std::string_view split_name) {
    rng.discard(uint64_t(d.rank) * B);
    sample_batch(idx, targets, ids, B, T, rng, split_name);
    rng.discard(uint64_t(d.size - 1 - d.rank) * B);
}

// Runs f(s) for every batch thread s in [0, R): on R threads, one each, when R > 1. Inside, the
// layers' own parallel loops and OpenBLAS run single-threaded (one threading layer per region).
// An exception thrown by one is rethrown here, after the region (lib/core/parallel.h).
template <typename F>
static void for_each_batch_thread(int R, F f) {
    if (R == 1) return f(0);
    ParallelExceptions errors;
#pragma omp parallel for num_threads(R) schedule(static, 1)
    for (int s = 0; s < R; s++) errors.run(s, [&] { f(s); });
    errors.rethrow();
}

void Trainer::allocate(const GPTConfig& config) {
    const int rows = cfg.batch_size / cfg.batch_threads;
    gpt_build<float>(model, config, rows, config.block_size, nullptr, cfg.activations);
    replicas.clear();
    replicas.resize(cfg.batch_threads - 1);
    for (GPT<float>& replica : replicas) gpt_build(replica, config, rows, config.block_size, &model);
    if (cfg.dtype == DType::BFloat16) {  // the bf16 copies, only then (a float run's memory is as before)
        gpt_use_bf16(model);
        for (GPT<float>& replica : replicas) gpt_use_bf16(replica, &model);
    }
    thread_loss.assign(cfg.batch_threads, 0.0);
    m.allocate(model.num_parameters);
    v.allocate(model.num_parameters);
    OptimizerGroups groups = optimizer_groups(model.table, cfg.optimizer);
    spans = std::move(groups.adamw);
    muon.build(groups.muon, cfg.dtype == DType::BFloat16);  // bf16: Newton–Schulz on bf16 products too
    batch.allocate(2 * size_t(cfg.batch_size) * config.block_size);
}

void Trainer::start(const GPTConfig& config, const TrainConfig& train, std::vector<std::string> vocab_,
                    const TokenView& train_ids_, const TokenView& val_ids_) {
    train.validate();
    check_vocabulary(tokenizer, vocab_, config.vocab_size);
    start_uninitialised(config, train, train_ids_, val_ids_);
    gpt_init(model, cfg.seed);
    gpt_round_weights(model);
    vocab = std::move(vocab_);
}

void Trainer::start_uninitialised(const GPTConfig& config, const TrainConfig& train, const TokenView& train_ids_,
                                  const TokenView& val_ids_) {
    train.validate();
    cfg = train;
    allocate(config);
    train_ids = train_ids_, val_ids = val_ids_;
    batch_rng = Rng(mix64(cfg.seed ^ 0x62617463ULL));  // "batc": its own stream
    progress = TrainProgress{};
}

void Trainer::start_from(const Checkpoint& ck, const GPTConfig& config, const TrainConfig& train,
                         const TokenView& train_ids_, const TokenView& val_ids_) {
    tokenizer = ck.tokenizer;
    start(config, train, ck.vocab, train_ids_, val_ids_);
    ck.read_weights_cropped(model);
    gpt_round_weights(model);  // a checkpoint holds float weights; bf16 copies are made from them
}

void Trainer::resume(const Checkpoint& ck, const TrainConfig& train, const TokenView& train_ids_,
                     const TokenView& val_ids_) {
    train.validate();
    cfg = train;
    allocate(ck.config);
    ck.read_weights(model);
    gpt_round_weights(model);  // float weights in either dtype: the copies follow from them, so resume is exact
    ck.read_optimizer(model, m.data(), v.data());
    const OptimizerKind saved = train_config_from_json(ck.progress.train_config).optimizer;  // absent: adamw
    check(saved == cfg.optimizer, "the checkpoint was trained with --optimizer={} and this run asks for {}: "
          "the moments it holds belong to that optimizer", to_string(saved), to_string(cfg.optimizer));
    tokenizer = ck.tokenizer;
    vocab = ck.vocab;
    train_ids = train_ids_, val_ids = val_ids_;
    check(ck.progress.world_size == dist.size,
          "the checkpoint was written by a run on {} rank(s) and this run has {}: resume it with "
          "mpirun -np {} (the effective batch N·B·K and the batch streams depend on N)",
          ck.progress.world_size, dist.size, ck.progress.world_size);
    progress = ck.progress;
    batch_rng = Rng(progress.rng_batch);
}

double Trainer::accumulate_gradient() {
    const int B = cfg.batch_size, T = model.config.block_size, K = cfg.gradient_accumulation_steps;
    const int N = dist.size, R = cfg.batch_threads, rows = B / R;
    int* idx = batch.data();
    int* targets = idx + size_t(B) * T;
    if (model.profile) model.profile->restart();
    for (int s = 0; s < R; s++) thread_loss[s] = 0;
    for (int k = 0; k < K; k++) {
        sample_rank_rows(idx, targets, train_ids, B, T, batch_rng, dist, "train");
        if (model.profile) model.profile->tick(Work::Other, false);
        const uint64_t step_key = mix64(cfg.seed ^ mix64(uint64_t(progress.iter_num) * 1024 + k));
        for_each_batch_thread(R, [&](int s) {
            if (k == 0) gpt_zero_grad(replica(s));  // each batch thread its own, side by side
            // batch thread s of rank r is batch thread r·R + s of all N·R: its rows, its own dropout masks
            const uint64_t thread = uint64_t(dist.rank) * R + s;
            const uint64_t key = thread > 0 ? mix64(step_key ^ thread) : step_key;
            const size_t at = size_t(s) * rows * T;
            thread_loss[s] += gpt_forward(replica(s), idx + at, targets + at, rows, T, ForwardMode{true, key}) / K;
            gpt_backward(replica(s), 1.0f / (float(K) * N * R));  // the mean over N·R batch threads × K micro-batches
        });
        if (model.profile && R > 1) model.profile->tick(Work::Wait, true);  // replica 0 idle until the others finish
    }
    if (R > 1) {  // the replicas' gradients into the model's, in a fixed order (for R = 2: a + b, an MPI sum's bits)
        const size_t P = model.num_parameters, chunk = 1 << 14;
#pragma omp parallel for schedule(static) num_threads(R)
        for (size_t i0 = 0; i0 < P; i0 += chunk)
            for (int s = 1; s < R; s++)
                vec_acc(model.grads_memory.data() + i0, replica(s).grads_memory.data() + i0, std::min(chunk, P - i0));
        if (model.profile) model.profile->tick(Work::Other, true);
    }
    double loss = 0;
    for (int s = 0; s < R; s++) loss += thread_loss[s];
    loss /= R;
    if (N > 1) {  // the sum over ranks of the 1/(N·R·K)-scaled gradients: the mean over N·R·K
        const auto t0 = std::chrono::steady_clock::now();
        dist_sum(dist, model.grads_memory.data(), model.num_parameters);
        loss = dist_mean(dist, loss);  // a non-finite loss on any rank stops every rank
        comm_seconds += seconds_since(t0);
        if (model.profile) model.profile->tick(Work::Other, true);
    }
    return loss;
}

StepResult Trainer::step() {
    StepResult r;
    r.loss = accumulate_gradient();
    if (!std::isfinite(r.loss)) return r;  // the caller stops; the weights are not touched
    // Clipping's factor goes into the optimizers' pass (the gradient itself is left unscaled).
    r.grad_norm = grad_global_norm(model.grads_memory.data(), model.num_parameters);
    const float scale = clip_scale(r.grad_norm, cfg.grad_clip);
    r.lr = lr_at(cfg.schedule, progress.iter_num);
    progress.adam_step += 1;
    // With bf16 on, the optimizers write each weight's bf16 copy as they update it (null: off).
    bf16* copies = model.mixed.weights;
    adamw_step(model.params_memory.data(), model.grads_memory.data(), m.data(), v.data(), spans, float(r.lr),
               cfg.adamw, progress.adam_step, scale, copies);
    if (!muon.matrices.empty())
        muon.step(model.params_memory.data(), model.grads_memory.data(), m.data(), muon_lr_at(r.lr),
                  cfg.adamw.weight_decay, muon_momentum_at(cfg.muon, progress.iter_num), {}, scale, copies);
    if (model.profile) model.profile->tick(Work::Optimizer, true);
    progress.iter_num += 1;
    progress.rng_batch = batch_rng.state;
    return r;
}

double Trainer::muon_lr_at(double lr) const {
    const double peak = cfg.schedule.learning_rate;
    return cfg.muon.lr > 0 && peak > 0 ? cfg.muon.lr * (lr / peak) : lr;
}

// The iterations of `step_seconds` each that fit in `seconds`, 2 % kept in reserve.
static double iters_that_fit(double seconds, double step_seconds) {
    return std::clamp(0.98 * seconds / step_seconds, 0.0, 1e9);
}

BudgetPlan Trainer::plan_time_budget() {
    check(cfg.time_budget > 0, "plan_time_budget needs a time budget");
    const auto t0 = std::chrono::steady_clock::now();
    // Everything a step changes, to put back afterwards (copies made here, before any step).
    const std::vector<float> params(model.params_memory.data(), model.params_memory.data() + model.num_parameters);
    const std::vector<float> m0(m.data(), m.data() + model.num_parameters),
        v0(v.data(), v.data() + model.num_parameters);
    const TrainProgress progress0 = progress;
    const Rng rng0 = batch_rng;
    const double comm0 = comm_seconds;
    // The first step pays for cold caches and is not timed; then at least 5 timed steps, more
    // while they take under 0.5 % of the budget (the ranks agree on when to stop).
    step();
    std::vector<double> times;
    const auto timed0 = std::chrono::steady_clock::now();
    while (
        dist_any(dist, times.size() < 5 || (times.size() < 1000 && seconds_since(timed0) < 0.005 * cfg.time_budget))) {
        const auto s0 = std::chrono::steady_clock::now();
        step();
        times.push_back(seconds_since(s0));
    }
    std::copy(params.begin(), params.end(), model.params_memory.data());
    std::copy(m0.begin(), m0.end(), m.data());
    std::copy(v0.begin(), v0.end(), v.data());
    gpt_round_weights(model);
    progress = progress0, batch_rng = rng0, comm_seconds = comm0;
    gpt_zero_grad(model);

    std::sort(times.begin(), times.end());
    BudgetPlan plan;
    plan.step_seconds = dist_mean(dist, times[times.size() / 2]);
    plan.timed_steps = int(times.size());
    plan.spent = dist_mean(dist, seconds_since(t0));
    apply_budget_plan(plan);
    return plan;
}

void Trainer::apply_budget_plan(const BudgetPlan& plan) {
    const double iters = iters_that_fit(cfg.time_budget - plan.spent, plan.step_seconds);
    check(iters >= 1, "a time budget of {} s fits no training step: one takes {:.3f} s (and timing them took {:.3f} s)",
          cfg.time_budget, plan.step_seconds, plan.spent);
    cfg.max_iters = int(iters);
    cfg.schedule.lr_decay_iters = cfg.max_iters;
    cfg.schedule.warmup_iters = std::min(cfg.schedule.warmup_iters, cfg.max_iters);
}

int Trainer::replan_time_budget(double seconds_left, double step_seconds) {
    check(progress.iter_num >= cfg.schedule.warmup_iters, "a re-plan must come at or after the warmup's end");
    const double left = iters_that_fit(dist_mean(dist, seconds_left), dist_mean(dist, step_seconds));
    cfg.max_iters = progress.iter_num + std::max(1, int(left));
    cfg.schedule.replans.push_back({progress.iter_num, cfg.max_iters});
    return cfg.max_iters;
}

double Trainer::estimate_loss(const TokenView& ids) { return *estimate_loss(ids, [] { return false; }); }

std::optional<double> Trainer::estimate_loss(const TokenView& ids, const std::function<bool()>& stop) {
    const int B = cfg.batch_size, T = model.config.block_size;
    int* idx = batch.data();
    int* targets = idx + size_t(B) * T;
    Rng rng(mix64(cfg.seed ^ mix64(uint64_t(progress.iter_num) + 0x6576616cULL)));  // "eval"
    const int R = cfg.batch_threads, rows = B / R;
    for (int s = 0; s < R; s++) thread_loss[s] = 0;
    for (int i = 0; i < cfg.eval_iters; i++) {
        if (stop()) return std::nullopt;
        sample_rank_rows(idx, targets, ids, B, T, rng, dist, ids.same_as(val_ids) ? "val" : "train");
        for_each_batch_thread(R, [&](int s) {
            const size_t at = size_t(s) * rows * T;
            thread_loss[s] += gpt_forward(replica(s), idx + at, targets + at, rows, T);
        });
    }
    double mean = 0;  // the N·R batch threads have as many rows each: the mean of their means
    for (int s = 0; s < R; s++) mean += thread_loss[s] / cfg.eval_iters;
    return dist_mean(dist, mean / R);
}

void Trainer::save(const std::string& path) const {
    if (dist.rank != 0) return;
    TrainProgress p = progress;
    p.world_size = dist.size;
    p.rng_batch = batch_rng.state;  // where the sampler stands now, even before the first step
    p.train_config = train_config_to_json(cfg, run_info);  // the plan as it stands, re-plans included
    save_checkpoint(path, model, vocab, p, m.data(), v.data(), tokenizer);
}

size_t Trainer::state_floats() const {
    return model.num_parameters * (3 + replicas.size() + 1) +
           muon.scratch.size();  // params, m, v; a gradient per replica
}

size_t Trainer::activation_floats() const {
    size_t n = model.acts_memory.size() + model.scratch_memory.size();
    for (const GPT<float>& r : replicas) n += r.acts_memory.size() + r.scratch_memory.size();
    return n;
}

bool Trainer::ranks_agree() const {
    uint64_t h = 0;
    const float* w = model.params_memory.data();
    for (size_t i = 0; i < model.num_parameters; i++) {
        uint32_t bits;
        std::memcpy(&bits, &w[i], sizeof bits);
        h = mix64(h ^ bits);
    }
    return dist_agree(dist, h);
}

}  // namespace hg

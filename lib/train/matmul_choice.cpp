// matmul_choice.cpp — see matmul_choice.h.
#include "lib/train/matmul_choice.h"

#include <nlohmann/json.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "lib/core/errors.h"
#include "lib/core/tensor.h"
#include "lib/kernels/matmul_bf16.h"
#include "lib/model/gpt.h"
#include "lib/model/memory_check.h"
#include "lib/train/startup_cache.h"
#include "lib/train/startup_choice.h"
#include "lib/train/trainer.h"

namespace hg {

std::optional<MatmulBackend> parse_matmul_flag(const std::string& s) {
    if (s == "auto") return std::nullopt;
    const MatmulBackend b = parse_matmul_backend(s);  // its error names every backend and auto
    if (!matmul_available(b)) {
        std::string others;
        for (MatmulBackend a : matmul_backends()) others += to_string(a) + ", ";
        fail("--matmul={}: this build has no oneDNN (make deps installs libdnnl-dev; then rebuild), use {}or auto",
             s, others);
    }
    return b;
}

std::vector<MatmulCall> record_matmuls(const std::function<void()>& work, bool compute) {
    std::vector<MatmulCall> calls;
    matmul_record(&calls, compute);
    try {
        work();
    } catch (...) {
        matmul_record(nullptr);
        throw;
    }
    matmul_record(nullptr);
    return calls;
}

// `work` run once with its products recorded, not computed, and the ms it took.
static ModelWork recorded_work(const std::function<void()>& work) {
    ModelWork w;
    const auto t0 = std::chrono::steady_clock::now();
    w.calls = record_matmuls(work, /*compute=*/false);
    w.other_ms = 1000 * seconds_since(t0);
    return w;
}

// The work of a model of n_layer blocks from the work of models of one and of two blocks: each
// block adds what the second added. (A time that the second block seems to lower, as noise
// can, adds nothing.)
static ModelWork carried(const ModelWork& one, ModelWork two, int n_layer) {
    for (MatmulCall& c : two.calls) {
        long c1 = 0;
        for (const MatmulCall& o : one.calls)
            if (o.same_call(c)) c1 = o.count;
        c.count = std::lround(carry_to_depth(double(c1), double(c.count), n_layer));
    }
    two.other_ms = carry_to_depth(one.other_ms, std::max(one.other_ms, two.other_ms), n_layer);
    return two;
}

// The same, with `run` giving the work of `config` at another depth (run(c): c with its n_layer set).
static ModelWork by_depth(const GPTConfig& config, const std::function<ModelWork(const GPTConfig&)>& run) {
    const auto at_depth = [&](int L) {
        GPTConfig c = config;
        c.n_layer = L;
        return run(c);
    };
    if (config.n_layer <= 2) return at_depth(config.n_layer);
    return carried(at_depth(1), at_depth(2), config.n_layer);
}

// The timing models' activations stay within this (the model of two blocks, all its replicas).
static constexpr double kTimingBytes = 64.0 * (1 << 20);

// How many sequences each replica runs in the timing models: the most, doubling from one, whose
// activations fit in kTimingBytes, and no more than the run's own.
static int timing_sequences(const GPTConfig& config, const TrainConfig& train, int replicas, int run_sequences) {
    GPTConfig two = config;
    two.n_layer = std::min(config.n_layer, 2);
    const auto bytes = [&](int b) {
        return double(replicas) * sizeof(float) *
               double(gpt_activation_floats(two, b, config.block_size, train.activations));
    };
    int b = 1;
    while (2 * b <= run_sequences && bytes(2 * b) <= kTimingBytes) b *= 2;
    return b;
}

// One model's step at `sequences` a replica: its products recorded, not computed, and, when
// `timed`, the ms of its forward and backward (the replicas' gradients summed) without them.
static ModelWork step_work(const GPTConfig& c, const TrainConfig& train, int sequences, const TokenView& ids,
                           bool timed) {
    TrainConfig t = train;
    t.batch_size = sequences * std::max(1, train.batch_threads);
    t.gradient_accumulation_steps = 1, t.time_budget = 0;
    Trainer trainer;  // one process: only its own products are recorded
    trainer.start_uninitialised(c, t, ids, ids);
    // AdamW's update is elementwise and makes no products, so with AdamW the forward and
    // backward are all there is to record, and the moments' pages are never touched; Muon's
    // step makes products of its own, recorded with the whole step.
    ModelWork w;
    w.calls = record_matmuls([&] { t.optimizer == OptimizerKind::AdamW ? void(trainer.accumulate_gradient())
                                                                       : void(trainer.step()); },
                             /*compute=*/false);
    // Timed after that first pass (the arenas' pages are touched by then), without the
    // optimizer's own loops: they come after the replicas' gradients are summed, the same
    // whatever the batch threads and backend.
    // The best of two passes: one pass can be held up, and this time is one number per option.
    const auto pass_ms = [&] { return recorded_work([&] { trainer.accumulate_gradient(); }).other_ms; };
    if (timed) w.other_ms = std::min(pass_ms(), pass_ms());
    return w;
}

// Whether `small` (a call at b sequences a replica) and `twice` (at 2b) are one call of the
// model: the same in everything but sizes and a count that double with the batch.
static bool same_but_batch(const MatmulCall& small, const MatmulCall& twice) {
    const auto pair = [](long x, long y) { return y == x || y == 2 * x; };
    return small.form == twice.form && small.beta == twice.beta && small.team == twice.team &&
           small.bf16 == twice.bf16 && pair(small.M, twice.M) && pair(small.N, twice.N) && pair(small.K, twice.K) &&
           pair(small.lda, twice.lda) && pair(small.ldb, twice.ldb) && pair(small.ldc, twice.ldc) &&
           pair(small.count, twice.count);
}

std::optional<std::vector<MatmulCall>> calls_at_batch(std::vector<MatmulCall> calls,
                                                      const std::vector<MatmulCall>& at_b,
                                                      const std::vector<MatmulCall>& at_2b, int b, int sequences) {
    // Pair every call at b with the one call at 2b it can be, each used once.
    if (at_b.size() != at_2b.size()) return std::nullopt;
    std::vector<size_t> partner(at_b.size());
    std::vector<bool> taken(at_2b.size(), false);
    for (size_t i = 0; i < at_b.size(); i++) {
        int candidates = 0;
        for (size_t k = 0; k < at_2b.size(); k++)
            if (same_but_batch(at_b[i], at_2b[k])) candidates++, partner[i] = k;
        if (candidates != 1 || taken[partner[i]]) return std::nullopt;  // which is which is unknown
        taken[partner[i]] = true;
    }
    for (MatmulCall& c : calls) {
        // c itself, else the one call that is c but for its team
        auto small = std::find_if(at_b.begin(), at_b.end(), [&](const MatmulCall& m) { return m.same_call(c); });
        if (small == at_b.end()) {
            const auto is_c = [&](const MatmulCall& m) { return m.same_but_team(c); };
            small = std::find_if(at_b.begin(), at_b.end(), is_c);
            if (small == at_b.end() || std::count_if(at_b.begin(), at_b.end(), is_c) != 1) return std::nullopt;
        }
        const MatmulCall& twice = at_2b[partner[size_t(small - at_b.begin())]];
        bool whole = true;  // every size and count that grows is a whole number of times b
        const auto grow = [&](auto& x, long small_x, long twice_x) {
            if (twice_x == small_x) return;
            whole = whole && x % b == 0;
            x = decltype(x + 0)(long(x) / b * sequences);
        };
        grow(c.M, small->M, twice.M), grow(c.N, small->N, twice.N), grow(c.K, small->K, twice.K);
        grow(c.lda, small->lda, twice.lda), grow(c.ldb, small->ldb, twice.ldb), grow(c.ldc, small->ldc, twice.ldc);
        grow(c.count, small->count, twice.count);
        if (!whole) return std::nullopt;
    }
    return calls;
}

ModelWork training_step_work(const GPTConfig& config, const TrainConfig& train, const TokenView& ids,
                             int timed_sequences, BatchGrowth* growth) {
    // The step is timed on a few sequences a replica, not the run's batch: everything besides
    // the products works sequence by sequence, so its time grows in proportion to the
    // sequences, and the memory a model of the run's batch would touch for the first time
    // (seconds a GiB on some machines) is not touched at all. The products are the run's own:
    // recorded at b and 2b sequences to see which of their sizes grow with the batch, and grown
    // to the run's.
    const int R = std::max(1, train.batch_threads), sequences = train.batch_size / R;
    const int b = timed_sequences > 0 ? std::min(timed_sequences, sequences)
                                      : timing_sequences(config, train, R, sequences);
    const auto work = [&](int n_layer, int s, bool timed) {
        GPTConfig c = config;
        c.n_layer = n_layer;
        return step_work(c, train, s, ids, timed);
    };
    const int L = config.n_layer;
    if (L == 2 && b == sequences) return work(2, b, true);  // the run's own model: nothing to carry or grow
    const ModelWork one = work(1, b, /*timed=*/L != 2);  // at two blocks, only its calls are needed
    ModelWork w = L == 1 ? one : L == 2 ? work(2, b, true) : carried(one, work(2, b, true), L);
    w.other_ms *= double(sequences) / b;
    if (b == sequences) return w;
    std::optional<std::vector<MatmulCall>> grown;
    if (growth && growth->b == b) grown = calls_at_batch(w.calls, growth->at_b, growth->at_2b, b, sequences);
    if (!grown) {
        BatchGrowth own{b, one.calls, work(1, 2 * b, false).calls};
        grown = calls_at_batch(w.calls, own.at_b, own.at_2b, b, sequences);
        if (growth && growth->b == 0) *growth = std::move(own);
    }
    w.calls = grown ? std::move(*grown)
                    : by_depth(config, [&](const GPTConfig& c) { return step_work(c, train, sequences, ids, false); })
                          .calls;
    return w;
}

std::vector<MatmulCall> training_step_matmuls(const GPTConfig& config, const TrainConfig& train,
                                              const TokenView& ids) {
    return training_step_work(config, train, ids).calls;
}

std::vector<MatmulCall> forward_matmuls(const GPTConfig& config, int B, int T) {
    return by_depth(config, [&](const GPTConfig& c) {
        GPT<float> model;
        gpt_build(model, c, B, T);
        std::vector<int> idx(size_t(B) * T, 0);
        return recorded_work([&] { gpt_forward(model, idx.data(), nullptr, B, T); });
    }).calls;
}

std::optional<std::string> recorded_text(const std::string& train_config, const std::string& field) {
    const nlohmann::json j = nlohmann::json::parse(train_config, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains(field) || !j[field].is_string()) return std::nullopt;
    return j[field].get<std::string>();
}

std::optional<MatmulBackend> recorded_matmul(const std::string& train_config) {
    const std::optional<std::string> name = recorded_text(train_config, "matmul");
    for (MatmulBackend b : matmul_backends())
        if (name == to_string(b)) return b;
    return std::nullopt;
}

bool no_float_products(const std::vector<double>& ms) {
    return !ms.empty() && std::all_of(ms.begin(), ms.end(), [&](double x) { return x == ms[0]; });
}

MatmulChoice choose_matmul(const std::string& flag, const std::string& key,
                           const std::function<std::vector<MatmulCall>()>& calls, int threads, const Dist& dist,
                           std::optional<MatmulBackend> resumed) {
    MatmulChoice c;
    if (const std::optional<MatmulBackend> given = parse_matmul_flag(flag)) {
        c.backend = *given;
        c.why = "as --matmul says";
        return c;
    }
    if (resumed) {
        c.backend = *resumed;
        c.why = "auto: as the checkpoint was trained";
        return c;
    }
    const std::vector<MatmulBackend> all = matmul_backends();
    std::vector<std::string> names;
    for (MatmulBackend b : all) names.push_back(to_string(b));
    const auto measure = [&] { return time_matmul_calls(calls(), all, threads); };
    const StartupChoice s = choose_at_startup(names, key, measure, dist);
    c.backend = all[s.taken], c.ms = s.ms, c.seconds = s.seconds;
    c.why = all.size() == 1          ? "auto: the only backend in this build"
            : no_float_products(s.ms) ? "auto: the step makes no float products (its products are bf16), so the first"
                                      : "auto: the products take " + s.compared(names) + "; " + s.source();
    return c;
}

std::string training_key(const GPTConfig& config, const TrainConfig& train, int threads) {
    return fmt::format("{} | threads {} | {} | dropout {} | B {} {} {}", machine_signature(), threads,
                       config_key(config), config.dropout, train.batch_size, to_string(train.optimizer),
                       to_string(train.dtype));
}

std::string training_matmul_key(const GPTConfig& config, const TrainConfig& train, int threads) {
    return fmt::format("matmul train | {} | R {}{}", training_key(config, train, threads), train.batch_threads,
                       train.dtype == DType::BFloat16 ? " | bf16 " + to_string(matmul_bf16_backend()) : "");
}

std::string forward_matmul_key(const GPTConfig& config, int B, int T, int threads) {
    return fmt::format("matmul forward | {} | threads {} | {} | B {} T {}", machine_signature(), threads,
                       config_key(config), B, T);
}

}  // namespace hg

// batch_threads.cpp — see batch_threads.h.
#include "lib/train/batch_threads.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "lib/core/errors.h"
#include "lib/kernels/matmul.h"
#include "lib/train/startup_cache.h"
#include "lib/train/trainer.h"

namespace hg {

int parse_batch_threads(const std::string& s) {
    if (s == "auto") return 0;
    int n = 0;
    char tail = 0;
    check(std::sscanf(s.c_str(), "%d%c", &n, &tail) == 1 && n >= 1,
          "--batch_threads must be auto or a positive integer (got '{}')", s);
    return n;
}

int replica_candidate(int batch_size, int threads) {
    for (int R = std::min(batch_size, threads); R > 1; R--)
        if (batch_size % R == 0) return R;
    return 1;
}

// The batch_threads a checkpoint's train_config records; 0 when it records none (a checkpoint
// from elsewhere, or an older one: the train_config is informational, so a bad one is no error).
static int recorded_batch_threads(const std::string& train_config) {
    TrainConfig none;
    none.batch_threads = 0;
    try {
        return train_config_from_json(train_config, none).batch_threads;
    } catch (const Error&) {
        return 0;
    }
}

static double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The median step time in ms of a model of its own with `R` batch threads: one untimed step
// (cold caches, thread pools), then at least 3 timed ones, more while they take under 0.25 s. A
// step of over 2 s is timed once, cold: its cold start is a small part of it, and three more
// of each setting would hold up the start of a long run by minutes.
static double median_step_ms_at(const GPTConfig& config, TrainConfig t, int R, const TokenView& ids) {
    t.batch_threads = R;
    t.gradient_accumulation_steps = 1;
    t.time_budget = 0;
    Trainer trainer;  // one process (no collectives): each rank times its own
    trainer.start(config, t, std::vector<std::string>(config.vocab_size, ""), ids, ids);
    const auto cold = std::chrono::steady_clock::now();
    trainer.step();
    const double cold_seconds = seconds_since(cold);
    if (cold_seconds > 2) return 1000 * cold_seconds;
    std::vector<double> ms;
    const auto t0 = std::chrono::steady_clock::now();
    while (ms.size() < 3 || (ms.size() < 20 && seconds_since(t0) < 0.25)) {
        const auto s0 = std::chrono::steady_clock::now();
        trainer.step();
        ms.push_back(1000 * seconds_since(s0));
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

// The same for the whole model, from models of one and two blocks when it has more: each block
// adds the same work, so the step of n_layer blocks is the one-block step plus n_layer - 1 times
// what the second block added. A deep model's start-up then times two small models per
// setting instead of the whole one.
static double median_step_ms(const GPTConfig& config, const TrainConfig& t, int R, const TokenView& ids) {
    if (config.n_layer <= 2) return median_step_ms_at(config, t, R, ids);
    GPTConfig one = config, two = config;
    one.n_layer = 1, two.n_layer = 2;
    const double ms1 = median_step_ms_at(one, t, R, ids), ms2 = median_step_ms_at(two, t, R, ids);
    return ms1 + (config.n_layer - 1) * std::max(0.0, ms2 - ms1);
}

BatchThreadsChoice choose_batch_threads(const GPTConfig& config, const TrainConfig& train, int threads,
                                        const TokenView& ids, const Dist& dist, const Checkpoint* resumed) {
    BatchThreadsChoice c;
    c.candidate = replica_candidate(train.batch_size, threads);
    const int recorded = resumed ? recorded_batch_threads(resumed->progress.train_config) : 0;
    if (recorded >= 1 && recorded <= threads && train.batch_size % recorded == 0) {
        c.batch_threads = recorded;
        c.why = "as the checkpoint was trained";
        return c;
    }
    // A setting measured earlier on this machine for these shapes is taken as it was.
    const std::string key = fmt::format("batch_threads | {} | threads {} | {} | B {} {} {} | matmul {}",
                                        machine_signature(), threads, config_key(config), train.batch_size,
                                        to_string(train.optimizer), to_string(train.dtype), to_string(matmul_current()));
    bool remembered = false;
    if (c.candidate > 1) {
        // The value: the batch threads taken, then the ms with replicas and with one shared model.
        const std::optional<RememberedChoice> seen = decode_choice(cache_get(key).value_or(""), 2);
        remembered = seen && (seen->taken == "1" || seen->taken == std::to_string(c.candidate));
        if (remembered) c.ms_replicas = seen->ms[0], c.ms_shared = seen->ms[1];
        // Every rank must agree on using it (each has its own cache only if on its own host).
        remembered = dist_mean(dist, remembered ? 1.0 : 0.0) == 1.0;
        if (remembered) c.ms_replicas = dist_mean(dist, c.ms_replicas), c.ms_shared = dist_mean(dist, c.ms_shared);
    }
    // Every rank takes part in the two means below, whatever its own candidate.
    const auto t0 = std::chrono::steady_clock::now();
    const bool timed = c.candidate > 1;
    if (timed && !remembered) {
        c.ms_replicas = median_step_ms(config, train, c.candidate, ids);
        c.ms_shared = median_step_ms(config, train, 1, ids);
    }
    if (!remembered) {
        c.ms_replicas = dist_mean(dist, c.ms_replicas);
        c.ms_shared = dist_mean(dist, c.ms_shared);
        c.seconds = dist_mean(dist, seconds_since(t0));
    }
    if (!timed) {
        c.why = threads <= 1 ? "one thread"
                             : fmt::format("no number of threads from 2 to {} divides batch_size {}", threads,
                                           train.batch_size);
        return c;
    }
    const bool replicas = c.ms_replicas < c.ms_shared;
    c.batch_threads = replicas ? c.candidate : 1;
    const bool remember = !remembered && choice_worth_remembering({c.ms_replicas, c.ms_shared}, c.seconds);
    if (remember && dist.rank == 0)
        cache_put(key, encode_choice({std::to_string(c.batch_threads), {c.ms_replicas, c.ms_shared}}));
    const std::string with_replicas = fmt::format("{} replicas of {} rows", c.candidate, train.batch_size / c.candidate);
    const std::string shared = fmt::format("all {} threads on one model", threads);
    c.why = fmt::format("{}, {:.1f} ms per step against {:.1f} ms with {}; {}",
                        replicas ? with_replicas : shared, replicas ? c.ms_replicas : c.ms_shared,
                        replicas ? c.ms_shared : c.ms_replicas, replicas ? shared : with_replicas,
                        remembered ? fmt::format("remembered from an earlier run on this machine ({})", cache_path())
                                   : fmt::format("timing took {:.1f} s{}", c.seconds,
                                                 remember ? "" : "; too close to remember, measured again next run"));
    return c;
}

}  // namespace hg

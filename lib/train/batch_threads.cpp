// batch_threads.cpp — see batch_threads.h.
#include "lib/train/batch_threads.h"

#include <algorithm>
#include <cstdio>

#include "lib/core/errors.h"
#include "lib/model/memory_check.h"
#include "lib/train/matmul_choice.h"

namespace hg {

int parse_batch_threads(const std::string& s) {
    if (s == "auto") return 0;
    int n = 0;
    char tail = 0;
    check(std::sscanf(s.c_str(), "%d%c", &n, &tail) == 1 && n >= 1,
          "--batch_threads must be auto or a positive integer (got '{}')", s);
    return n;
}

std::vector<int> batch_threads_candidates(int batch_size, int threads, const std::function<bool(int)>& fits) {
    std::vector<int> Rs{1};
    for (int R = 2; R <= std::min(batch_size, threads); R++)
        if (batch_size % R == 0 && fits(R)) Rs.push_back(R);
    return Rs;
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

std::string step_choice_key(const GPTConfig& config, const TrainConfig& train, int threads) {
    return "step | " + training_key(config, train, threads);
}

// Why R is the only batch threads auto had: one thread, no divisor, or memory.
static std::string why_only(int batch_size, int threads, const StepSetupFlags& flags) {
    if (threads <= 1) return "one thread";
    if (batch_threads_candidates(batch_size, threads, [](int) { return true; }).size() == 1)
        return fmt::format("no number of threads from 2 to {} divides batch_size {}", threads, batch_size);
    return fmt::format("the arenas of more batch threads do not fit in the {:.1f} GiB available",
                       flags.memory_bytes.value_or(0) / double(1 << 30));
}

static std::string layout(int R, int batch_size, int threads) {
    if (R > 1) return fmt::format("{} replicas of {} rows", R, batch_size / R);
    return threads > 1 ? fmt::format("all {} threads on one model", threads) : std::string("one model, one thread");
}

StepSetup choose_step_setup(const GPTConfig& config, const TrainConfig& train, int threads, const TokenView& ids,
                            const StepSetupFlags& flags, const Dist& dist) {
    StepSetup s;
    const int B = train.batch_size;
    const std::string train_config = flags.resumed ? flags.resumed->progress.train_config : "";
    // The backends left to choose from: the flag's, else the checkpoint's, else all.
    const std::optional<MatmulBackend> given = parse_matmul_flag(flags.matmul);
    const std::optional<MatmulBackend> kept = flags.resumed ? recorded_matmul(train_config) : std::nullopt;
    s.backends = given ? std::vector<MatmulBackend>{*given}
                 : kept ? std::vector<MatmulBackend>{*kept}
                        : matmul_backends();
    // The batch threads likewise; a recorded one only while it still divides the batch within the threads.
    const int recorded = flags.resumed ? recorded_batch_threads(train_config) : 0;
    const bool keep_R = flags.batch_threads == 0 && recorded >= 1 && recorded <= threads && B % recorded == 0;
    const auto fits = [&](int R) {
        const MemoryNeed need = memory_need(config, B, config.block_size, R, 3, train.dtype == DType::BFloat16,
                                            train.activations);
        return !flags.memory_bytes || memory_fits(need, *flags.memory_bytes);
    };
    s.Rs = flags.batch_threads > 0 ? std::vector<int>{flags.batch_threads}
           : keep_R               ? std::vector<int>{recorded}
                                  : batch_threads_candidates(B, threads, fits);

    std::vector<std::string> names;
    for (int R : s.Rs)
        for (MatmulBackend b : s.backends) names.push_back(fmt::format("{}/{}", to_string(b), R));
    s.choice = choose_at_startup(names, step_choice_key(config, train, threads), [&] {
        std::vector<std::vector<MatmulCall>> calls;
        std::vector<double> other_ms;
        BatchGrowth growth;  // recorded for the first R, used for every other at the same b
        for (int R : s.Rs) {
            TrainConfig t = train;
            t.batch_threads = R;
            ModelWork work = training_step_work(config, t, ids, 0, &growth);
            calls.push_back(std::move(work.calls)), other_ms.push_back(work.other_ms);
        }
        const std::vector<std::vector<double>> products = time_matmul_call_sets(calls, s.backends, threads);
        std::vector<double> ms;
        for (size_t r = 0; r < s.Rs.size(); r++)
            for (double p : products[r]) ms.push_back(p + other_ms[r]);
        return ms;
    }, dist);
    const size_t nb = s.backends.size();
    s.backend = s.backends[s.choice.taken % nb];
    s.batch_threads = s.Rs[s.choice.taken / nb];

    // The header lines: for each choice, the taken setting's step against the others'.
    const bool timed = !s.choice.ms.empty();
    const std::string source = s.choice.source();
    if (s.Rs.size() > 1 && timed) {
        std::vector<double> ms;  // each R at its best backend
        std::vector<std::string> labels;
        for (size_t r = 0; r < s.Rs.size(); r++) {
            ms.push_back(*std::min_element(s.choice.ms.begin() + r * nb, s.choice.ms.begin() + (r + 1) * nb));
            labels.push_back(layout(s.Rs[r], B, threads));
        }
        StartupChoice by_R = s.choice;
        by_R.ms = ms, by_R.taken = s.choice.taken / nb;
        s.batch_threads_why = fmt::format("{}; a step's products, forward and backward: ~{}; {}",
                                          layout(s.batch_threads, B, threads), by_R.compared(labels), source);
    } else {
        s.batch_threads_why = flags.batch_threads > 0 ? "as --batch_threads says"
                              : keep_R               ? "as the checkpoint was trained"
                              : s.Rs.size() == 1     ? why_only(B, threads, flags)
                                                     : source;
    }
    if (given) {
        s.matmul_why = "as --matmul says";
    } else if (kept) {
        s.matmul_why = "auto: as the checkpoint was trained";
    } else if (nb == 1) {
        s.matmul_why = "auto: the only backend in this build";
    } else if (!timed) {
        s.matmul_why = "auto: " + source;
    } else {
        const size_t r = s.choice.taken / nb;
        StartupChoice by_backend = s.choice;
        by_backend.ms.assign(s.choice.ms.begin() + r * nb, s.choice.ms.begin() + (r + 1) * nb);
        by_backend.taken = s.choice.taken % nb;
        std::vector<std::string> labels;
        for (MatmulBackend b : s.backends) labels.push_back(to_string(b));
        s.matmul_why = no_float_products(by_backend.ms)
                           ? "auto: the step makes no float products (its products are bf16), so the first"
                           : fmt::format("auto: a step's products, forward and backward: ~{} ({}); {}",
                                         by_backend.compared(labels), layout(s.batch_threads, B, threads), source);
    }
    return s;
}

}  // namespace hg

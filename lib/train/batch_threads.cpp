// batch_threads.cpp — see batch_threads.h.
#include "lib/train/batch_threads.h"

#include <algorithm>
#include <cstdio>

#include "lib/core/errors.h"
#include "lib/kernels/matmul_bf16.h"
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

std::optional<Bf16Backend> recorded_matmul_bf16(const std::string& train_config) {
    const std::optional<std::string> name = recorded_text(train_config, "matmul_bf16");
    for (Bf16Backend w : matmul_bf16_backends())
        if (name == to_string(w)) return w;
    return std::nullopt;
}

std::optional<Bf16Backend> parse_matmul_bf16_flag(const std::string& s) {
    if (s == "auto") return std::nullopt;
    const Bf16Backend w = parse_bf16_backend(s);  // its error names every way and auto
    const std::vector<Bf16Backend> here = matmul_bf16_backends();
    check(std::find(here.begin(), here.end(), w) != here.end(), "--matmul_bf16={}: {}; use widen or auto", s,
          matmul_bf16_no_onednn());
    return w;
}

StepSetup choose_step_setup(const GPTConfig& config, const TrainConfig& train, int threads, const TokenView& ids,
                            const StepSetupFlags& flags, const Dist& dist) {
    StepSetup s;
    const int B = train.batch_size;
    const bool mixed = train.dtype == DType::BFloat16;
    const std::string train_config = flags.resumed ? flags.resumed->progress.train_config : "";
    // The backends left to choose from: the flag's, else the checkpoint's, else all.
    const std::optional<MatmulBackend> given = parse_matmul_flag(flags.matmul);
    const std::optional<MatmulBackend> kept = flags.resumed ? recorded_matmul(train_config) : std::nullopt;
    s.backends = given ? std::vector<MatmulBackend>{*given}
                 : kept ? std::vector<MatmulBackend>{*kept}
                        : matmul_backends();
    // The bf16 products' ways likewise, under bf16 (a float run has none to choose).
    const std::optional<Bf16Backend> way_given = parse_matmul_bf16_flag(flags.matmul_bf16);
    const std::optional<Bf16Backend> way_kept = flags.resumed ? recorded_matmul_bf16(train_config) : std::nullopt;
    s.ways = !mixed     ? std::vector<Bf16Backend>{matmul_bf16_backend()}
             : way_given ? std::vector<Bf16Backend>{*way_given}
             : way_kept  ? std::vector<Bf16Backend>{*way_kept}
                         : matmul_bf16_backends();
    // The batch threads likewise; a recorded one only while it still divides the batch within the threads.
    const int recorded = flags.resumed ? recorded_batch_threads(train_config) : 0;
    const bool keep_R = flags.batch_threads == 0 && recorded >= 1 && recorded <= threads && B % recorded == 0;
    const auto fits = [&](int R) {
        const MemoryNeed need = memory_need(config, B, config.block_size, R, 3, mixed, train.activations);
        return !flags.memory_bytes || memory_fits(need, *flags.memory_bytes);
    };
    s.Rs = flags.batch_threads > 0 ? std::vector<int>{flags.batch_threads}
           : keep_R               ? std::vector<int>{recorded}
                                  : batch_threads_candidates(B, threads, fits);

    // The options: ways × Rs × backends, in that order (a float run's names have no way).
    const size_t nw = s.ways.size(), nR = s.Rs.size(), nb = s.backends.size();
    std::vector<std::string> names;
    for (Bf16Backend w : s.ways)
        for (int R : s.Rs)
            for (MatmulBackend b : s.backends)
                names.push_back(fmt::format("{}/{}", to_string(b), R) + (mixed ? "/" + to_string(w) : ""));
    s.choice = choose_at_startup(names, step_choice_key(config, train, threads), [&] {
        // The recorded work does not depend on the way (no product is computed); its timing does.
        std::vector<std::vector<MatmulCall>> calls;
        std::vector<double> other_ms;
        BatchGrowth growth;  // recorded for the first R, used for every other at the same b
        for (int R : s.Rs) {
            TrainConfig t = train;
            t.batch_threads = R;
            ModelWork work = training_step_work(config, t, ids, 0, &growth);
            calls.push_back(std::move(work.calls)), other_ms.push_back(work.other_ms);
        }
        // The float products are timed once; the bf16 ones each way.
        std::vector<std::vector<MatmulCall>> floats(nR), bf16s(nR);
        for (size_t r = 0; r < nR; r++)
            for (const MatmulCall& m : calls[r]) (m.bf16 ? bf16s : floats)[r].push_back(m);
        const std::vector<std::vector<double>> float_ms = time_matmul_call_sets(floats, s.backends, threads);
        const Bf16BackendRestorer restore;
        std::vector<double> ms;
        for (Bf16Backend w : s.ways) {
            matmul_bf16_use(w);
            const std::vector<std::vector<double>> bf16_ms = time_matmul_call_sets(bf16s, s.backends, threads);
            for (size_t r = 0; r < nR; r++)
                for (size_t b = 0; b < nb; b++) ms.push_back(float_ms[r][b] + bf16_ms[r][b] + other_ms[r]);
        }
        return ms;
    }, dist);
    const size_t taken_w = s.choice.taken / (nR * nb), taken_r = s.choice.taken / nb % nR,
                 taken_b = s.choice.taken % nb;
    s.way = s.ways[taken_w];
    s.backend = s.backends[taken_b];
    s.batch_threads = s.Rs[taken_r];

    // The header lines: for each choice, the taken setting's step against the others'. Along
    // one axis of the options, each at `fixed` settings of the others (-1: at its best).
    const auto along = [&](int axis, long fixed_w, long fixed_r, long fixed_b) {
        const size_t n[3] = {nw, nR, nb};
        const size_t taken[3] = {taken_w, taken_r, taken_b};
        StartupChoice c = s.choice;
        c.ms.assign(n[axis], 1e300);
        c.taken = taken[axis];
        for (size_t w = 0; w < nw; w++)
            for (size_t r = 0; r < nR; r++)
                for (size_t b = 0; b < nb; b++) {
                    if ((fixed_w >= 0 && long(w) != fixed_w) || (fixed_r >= 0 && long(r) != fixed_r) ||
                        (fixed_b >= 0 && long(b) != fixed_b))
                        continue;
                    const size_t at[3] = {w, r, b};
                    double& x = c.ms[at[axis]];
                    x = std::min(x, s.choice.ms[(w * nR + r) * nb + b]);
                }
        return c;
    };
    const bool timed = !s.choice.ms.empty();
    const std::string source = s.choice.source();
    if (nR > 1 && timed) {
        std::vector<std::string> labels;  // each R at its best backend and way
        for (int R : s.Rs) labels.push_back(layout(R, B, threads));
        s.batch_threads_why = fmt::format("{}; a step's products, forward and backward: ~{}; {}",
                                          layout(s.batch_threads, B, threads),
                                          along(1, -1, -1, -1).compared(labels), source);
    } else {
        s.batch_threads_why = flags.batch_threads > 0 ? "as --batch_threads says"
                              : keep_R               ? "as the checkpoint was trained"
                              : nR == 1              ? why_only(B, threads, flags)
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
        const StartupChoice by_backend = along(2, long(taken_w), long(taken_r), -1);
        std::vector<std::string> labels;
        for (MatmulBackend b : s.backends) labels.push_back(to_string(b));
        s.matmul_why = no_float_products(by_backend.ms)
                           ? "auto: the step makes no float products (its products are bf16), so the first"
                           : fmt::format("auto: a step's products, forward and backward: ~{} ({}); {}",
                                         by_backend.compared(labels), layout(s.batch_threads, B, threads), source);
    }
    if (!mixed) {
        s.way_why = "";
    } else if (way_given) {
        s.way_why = "as --matmul_bf16 says";
    } else if (way_kept) {
        s.way_why = "auto: as the checkpoint was trained";
    } else if (nw == 1) {
        s.way_why = "auto: the only way here (" + matmul_bf16_no_onednn() + ")";
    } else if (!timed) {
        s.way_why = "auto: " + source;
    } else {
        std::vector<std::string> labels;
        for (Bf16Backend w : s.ways) labels.push_back(to_string(w));
        s.way_why = fmt::format("auto: a step's products, forward and backward: ~{} ({}); {}",
                                along(0, -1, long(taken_r), -1).compared(labels),
                                layout(s.batch_threads, B, threads), source);
    }
    return s;
}

}  // namespace hg

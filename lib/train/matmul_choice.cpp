// matmul_choice.cpp — see matmul_choice.h.
#include "lib/train/matmul_choice.h"

#include <nlohmann/json.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>

#include "lib/core/errors.h"
#include "lib/core/tensor.h"
#include "lib/model/gpt.h"
#include "lib/train/startup_cache.h"
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

static double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<MatmulCall> record_matmuls(const std::function<void()>& work) {
    std::vector<MatmulCall> calls;
    matmul_record(&calls);
    try {
        work();
    } catch (...) {
        matmul_record(nullptr);
        throw;
    }
    matmul_record(nullptr);
    return calls;
}

// The calls of a model of n_layer blocks, from the calls of one block (`one`) and of two
// (`two`): each block adds the difference.
static std::vector<MatmulCall> carry_to_depth(const std::vector<MatmulCall>& one, std::vector<MatmulCall> two,
                                              int n_layer) {
    for (MatmulCall& c : two) {
        long c1 = 0;
        for (const MatmulCall& o : one)
            if (o.same_call(c)) c1 = o.count;
        c.count = c1 + long(n_layer - 1) * (c.count - c1);
    }
    return two;
}

static std::vector<MatmulCall> by_depth(const GPTConfig& config, const std::function<void(const GPTConfig&)>& run) {
    const auto at_depth = [&](int L) {
        GPTConfig c = config;
        c.n_layer = L;
        return record_matmuls([&] { run(c); });
    };
    if (config.n_layer <= 2) return at_depth(config.n_layer);
    return carry_to_depth(at_depth(1), at_depth(2), config.n_layer);
}

std::vector<MatmulCall> training_step_matmuls(const GPTConfig& config, const TrainConfig& train,
                                              const TokenView& ids) {
    return by_depth(config, [&](const GPTConfig& c) {
        TrainConfig t = train;
        t.gradient_accumulation_steps = 1, t.time_budget = 0;
        Trainer trainer;  // one process: only its own products are recorded
        trainer.start(c, t, std::vector<std::string>(c.vocab_size, ""), ids, ids);
        trainer.step();
    });
}

std::vector<MatmulCall> forward_matmuls(const GPTConfig& config, int B, int T) {
    return by_depth(config, [&](const GPTConfig& c) {
        GPT<float> model;
        gpt_build(model, c, B, T);
        gpt_init(model, 1);
        std::vector<int> idx(size_t(B) * T, 0);
        gpt_forward(model, idx.data(), nullptr, B, T);
    });
}

// The floats each operand of `m` spans.
static size_t a_size(const MatmulCall& m) { return size_t(m.form == MatmulForm::TN ? m.K : m.M) * m.lda; }
static size_t b_size(const MatmulCall& m) { return size_t(m.form == MatmulForm::NT ? m.N : m.K) * m.ldb; }
static size_t c_size(const MatmulCall& m) { return size_t(m.M) * m.ldc; }

// Seconds of one run of `m` (one per thread side by side when it was nested) with each of
// `backends`: the best of a few runs after a first, fewer for long calls. The backends take
// turns run by run, so a machine whose speed drifts while it measures (a VM's does, by tens of
// percent within minutes) slows them alike, instead of whichever was timed last.
static std::vector<double> time_call(const MatmulCall& m, const std::vector<MatmulBackend>& backends, int threads) {
    const int copies = m.nested ? threads : 1;
    std::vector<Arena<float>> a(copies), b(copies), c(copies);
    for (int t = 0; t < copies; t++) {
        a[t] = Arena<float>(a_size(m)), b[t] = Arena<float>(b_size(m)), c[t] = Arena<float>(c_size(m));
        for (size_t i = 0; i < a[t].size(); i++) a[t].data()[i] = float(i % 7) * 0.01f;
        for (size_t i = 0; i < b[t].size(); i++) b[t].data()[i] = float(i % 5) * 0.01f;
        c[t].zero();
    }
    const auto run = [&](MatmulBackend backend) {
        matmul_use(backend);
        const auto t0 = std::chrono::steady_clock::now();
        if (!m.nested) {
            matmul_run(m, c[0].data(), a[0].data(), b[0].data());
        } else {
#pragma omp parallel num_threads(copies)
            {
                const int t = omp_get_thread_num();
                matmul_run(m, c[t].data(), a[t].data(), b[t].data());
            }
        }
        return seconds_since(t0);
    };
    for (MatmulBackend backend : backends) run(backend);
    std::vector<double> best(backends.size(), 1e30);
    double total = 0, longest = 0;
    // At least two turns and 5 ms a backend, at most 20 turns; after a run over 50 ms, one turn.
    for (int rep = 0; rep < 20 && (rep < 2 || total < 0.005 * backends.size()) && longest <= 0.05; rep++)
        for (size_t i = 0; i < backends.size(); i++) {
            const double s = run(backends[i]);
            best[i] = std::min(best[i], s), total += s, longest = std::max(longest, s);
        }
    for (double& s : best) s /= copies;
    return best;
}

std::vector<double> time_matmul_calls(const std::vector<MatmulCall>& calls, const std::vector<MatmulBackend>& backends,
                                      int threads) {
    const MatmulBackend before = matmul_current();
    std::vector<double> ms(backends.size(), 0.0);
    for (const MatmulCall& m : calls) {
        const std::vector<double> s = time_call(m, backends, threads);
        for (size_t i = 0; i < backends.size(); i++) ms[i] += 1000 * double(m.count) * s[i];
    }
    matmul_use(before);
    return ms;
}

// The cache's value: the backend and each backend's time, in matmul_backends()' order. A name
// this build lacks is no answer either: the run measures again.
static std::string encode(const MatmulChoice& c) { return encode_choice({to_string(c.backend), c.ms}); }

static std::optional<MatmulChoice> decode(const std::string& s) {
    const std::optional<RememberedChoice> r = decode_choice(s, matmul_backends().size());
    if (!r) return std::nullopt;
    for (MatmulBackend b : matmul_backends())
        if (to_string(b) == r->taken) {
            MatmulChoice c;
            c.backend = b, c.ms = r->ms;
            return c;
        }
    return std::nullopt;
}

// "the products take 6.1 ms per step with onednn against 12.0 ms with openblas".
static std::string compared(const MatmulChoice& c) {
    const std::vector<MatmulBackend> all = matmul_backends();
    std::string s = fmt::format("the products take {:.3g} ms per step with {}",
                                c.ms[std::find(all.begin(), all.end(), c.backend) - all.begin()], to_string(c.backend));
    for (size_t i = 0; i < all.size(); i++)
        if (all[i] != c.backend) s += fmt::format(" against {:.3g} ms with {}", c.ms[i], to_string(all[i]));
    return s;
}

std::optional<MatmulBackend> recorded_matmul(const std::string& train_config) {
    const nlohmann::json j = nlohmann::json::parse(train_config, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("matmul") || !j["matmul"].is_string()) return std::nullopt;
    const std::string name = j["matmul"].get<std::string>();
    for (MatmulBackend b : matmul_backends())
        if (to_string(b) == name) return b;
    return std::nullopt;
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
    if (all.size() == 1) {
        c.why = "auto: the only backend in this build";
        return c;
    }
    std::optional<MatmulChoice> seen = decode(cache_get(key).value_or(""));
    // Every rank must take the remembered answer, or all measure (each host has its own cache).
    if (dist_mean(dist, seen ? 1.0 : 0.0) < 1.0) seen.reset();
    if (seen) {
        // One process keeps the backend it recorded (the times are rounded in the file and may
        // tie); ranks, whose caches may differ, take the faster on their mean times.
        if (dist.size > 1) {
            for (double& ms : seen->ms) ms = dist_mean(dist, ms);
            seen->backend = all[std::min_element(seen->ms.begin(), seen->ms.end()) - seen->ms.begin()];
        }
        seen->why = fmt::format("auto: {}, remembered from an earlier run on this machine ({})", compared(*seen),
                                cache_path());
        return *seen;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<MatmulCall> recorded = calls();
    if (recorded.empty()) {  // every product is bf16 (matmul_choice.h): the backend does not matter
        c.why = "auto: the step makes no float products (its products are bf16), so the first";
        return c;
    }
    c.ms = time_matmul_calls(recorded, all, threads);
    for (double& ms : c.ms) ms = dist_mean(dist, ms);
    c.backend = all[std::min_element(c.ms.begin(), c.ms.end()) - c.ms.begin()];
    c.seconds = dist_mean(dist, seconds_since(t0));
    const bool remember = choice_worth_remembering(c.ms, c.seconds);
    if (dist.rank == 0 && remember) cache_put(key, encode(c));
    c.why = fmt::format("auto: {}; {} distinct products timed in {:.1f} s{}", compared(c), recorded.size(), c.seconds,
                        remember ? "" : "; too close to remember, measured again next run");
    return c;
}

std::string training_matmul_key(const GPTConfig& config, const TrainConfig& train, int threads) {
    return fmt::format("matmul train | {} | threads {} | {} | B {} R {} {} {}", machine_signature(), threads,
                       config_key(config), train.batch_size, train.batch_threads, to_string(train.optimizer),
                       to_string(train.dtype));
}

std::string forward_matmul_key(const GPTConfig& config, int B, int T, int threads) {
    return fmt::format("matmul forward | {} | threads {} | {} | B {} T {}", machine_signature(), threads,
                       config_key(config), B, T);
}

}  // namespace hg

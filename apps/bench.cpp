// bench — how fast a training step is, against the best library product and the machine's peak.
//
//   build/bench --preset=course --batch_size=12             (nanoGPT's CPU recipe)
//   build/bench --preset=shakespeare-char --batch_size=64 --dropout=0
//
// Runs warm-up steps, then --steps timed training steps (forward, backward, clip, AdamW) on
// random tokens, and prints the median/min/max wall time per step, tokens/s, achieved GFLOP/s
// (FLOPs counted as `inspect` counts them: 3 × (2·(block params + C·V) + 4·T·C·L) per token),
// and against two ceilings measured in this run on the same threads: the best 2048³ product of
// the matmul backends built in (lib/kernels/matmul.h), and the machine's own peak, a loop of
// independent FMAs (f32) and of bf16 dot products where the CPU has them (lib/kernels/peak.h);
// then where the time goes. --products instead times each distinct product of one step with
// each matmul backend (lib/train/matmul_choice.h's timing, the way --matmul=auto does).
#include <cblas.h>
#include <omp.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "apps/flags.h"
#include "lib/kernels/matmul.h"
#include "lib/kernels/matmul_bf16.h"
#include "lib/kernels/peak.h"
#include "lib/kernels/simd.h"
#include "lib/model/count.h"
#include "lib/model/memory_check.h"
#include "lib/process/heap.h"
#include "lib/train/matmul_choice.h"
#include "lib/train/trainer.h"

using namespace hg;

static double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The best of a few 2048³ products with the current backend: what it can do on these threads.
static double sgemm_ceiling_gflops() {
    const int n = 2048;
    Arena<float> a(size_t(n) * n), b(size_t(n) * n), c(size_t(n) * n);
    for (size_t i = 0; i < a.size(); i++) a.data()[i] = float(i % 7) * 0.1f, b.data()[i] = float(i % 5) * 0.1f;
    double best = 1e9;
    for (int rep = 0; rep < 4; rep++) {
        double t0 = now();
        matmul_nt({c.data(), n, n, n}, {a.data(), n, n, n}, {b.data(), n, n, n}, 1.0f, 0.0f);
        best = std::min(best, now() - t0);
    }
    return 2.0 * n * n * double(n) / best / 1e9;
}

static double peak_rss_mib() {  // VmHWM: the process's peak resident memory
    std::ifstream f("/proc/self/status");
    std::string key;
    while (f >> key) {
        if (key == "VmHWM:") {
            double kb;
            f >> kb;
            return kb / 1024;
        }
        f.ignore(1 << 20, '\n');
    }
    return 0;
}

// Each distinct product of one step, GFLOP/s with each backend; a product made inside our
// parallel regions runs on one thread, one copy per thread side by side, and counts per thread.
static void print_products(const std::vector<MatmulCall>& calls, int threads) {
    fmt::print("{:>5} {:>5} {:>5} {:>5} {:>4} {:>6} {:>6}  GFLOP/s:", "form", "M", "N", "K", "beta", "nested", "count");
    const std::vector<MatmulBackend> backends = matmul_backends();
    std::vector<double> step_ms(backends.size(), 0.0);  // each call's time times its count
    for (MatmulBackend b : backends) fmt::print(" {:>9}", to_string(b));
    fmt::print("\n");
    for (const MatmulCall& m : calls) {
        const char* form = to_string(m.form);
        fmt::print("{:>5} {:>5} {:>5} {:>5} {:>4} {:>6} {:>6}          ", form, m.M, m.N, m.K, m.beta,
                   m.nested() ? "yes" : "no", m.count);
        MatmulCall one = m;
        one.count = 1;
        const std::vector<double> ms = time_matmul_calls({one}, backends, threads);
        for (size_t i = 0; i < ms.size(); i++) {
            fmt::print(" {:>9.1f}", 2.0 * m.M * m.N * double(m.K) / (ms[i] * m.team) / 1e6);
            step_ms[i] += double(m.count) * ms[i];
        }
        fmt::print("\n");
    }
    fmt::print("ms per step:");
    for (size_t i = 0; i < backends.size(); i++) fmt::print(" {} {:.3f};", to_string(backends[i]), step_ms[i]);
    fmt::print("\n");
}

int main(int argc, char** argv) {
    keep_heap_top();  // as train does (lib/process/heap.h)
    CLI::App app{"handgrad bench: training-step speed against the sgemm ceiling"};
    ModelFlags model;
    model.add(app);
    int batch_size = 12, steps = 10, warmup = 2, threads = 0, batch_threads = 1;
    bool json = false, products = false;
    std::string optimizer = "adamw", dtype = "float32", attention = "flash", recompute = "none";
    app.add_option("--dtype", dtype, "float32 | bfloat16 (train's flag)")->capture_default_str();
    app.add_option("--attention", attention, "flash | materialized (train's flag)")->capture_default_str();
    app.add_option("--recompute", recompute, "none | attention | block (train's flag)")->capture_default_str();
    app.add_option("--batch_size", batch_size)->capture_default_str();
    app.add_option("--optimizer", optimizer, "adamw | muon (train's flag: Muon's Newton–Schulz is part of the step)")
        ->capture_default_str();
    app.add_option("--steps", steps, "timed steps")->capture_default_str();
    app.add_option("--warmup", warmup, "untimed steps first")->capture_default_str();
    app.add_option("--threads", threads, "default: all cores");
    app.add_option("--batch_threads", batch_threads, "threads that each take batch_size / batch_threads rows "
                   "(train's flag)")->capture_default_str();
    app.add_flag("--json", json, "one JSON object");
    app.add_flag("--products", products, "no steps: each distinct product of one step timed with each matmul backend");
    MatmulFlag matmul;
    matmul.add(app);
    std::string way = to_string(matmul_bf16_backends().front());
    app.add_option("--matmul_bf16", way, "onednn | widen: how the bf16 products run under --dtype=bfloat16 "
                   "(train's flag; the default: the first that runs here)")->capture_default_str();
    return run_app(app, argc, argv, [&] {
        check(steps >= 1 && warmup >= 0, "--steps must be positive and --warmup >= 0");
        check_threads(threads, /*zero_is_default=*/true);
        matmul.validate();
        check(way != "auto", "--matmul_bf16: bench times the way it is given (onednn or widen); train chooses");
        matmul_bf16_use(parse_bf16_backend(way));
        if (threads > 0) omp_set_num_threads(threads);
        threads = omp_get_max_threads();
        openblas_set_num_threads(threads);
        const GPTConfig c = model.config();
        const int T = c.block_size;
        const ActivationPlan plan = training_plan(parse_attention(attention), parse_recompute(recompute));
        check_memory_available(
            memory_need(c, batch_size, T, batch_threads, 3, parse_dtype(dtype) == DType::BFloat16, plan));

        // Random tokens stand in for text: speed does not depend on what the tokens are.
        std::vector<int> ids(std::max<size_t>(200000, size_t(4) * T));
        Rng rng(1);
        for (int& t : ids) t = int(rng.below(c.vocab_size));
        std::vector<std::string> vocab(c.vocab_size, "?");
        TrainConfig tc;
        tc.batch_size = batch_size, tc.batch_threads = batch_threads, tc.max_iters = warmup + steps;
        tc.activations = plan;
        if (products) {
            tc.optimizer = parse_optimizer(optimizer), tc.dtype = parse_dtype(dtype);
            return print_products(training_step_matmuls(c, tc, ids), threads), 0;
        }
        tc.schedule = LrSchedule{1e-4, 1e-5, 0, warmup + steps, true};
        tc.optimizer = parse_optimizer(optimizer);
        tc.dtype = parse_dtype(dtype);
        const std::string matmul_line = matmul.apply(
            training_matmul_key(c, tc, threads), [&] { return training_step_matmuls(c, tc, ids); }, threads);
        Trainer trainer;
        trainer.start(c, tc, vocab, ids, ids);

        for (int i = 0; i < warmup; i++) trainer.step();
        Profile profile;
        trainer.model.profile = &profile;
        std::vector<double> ms;
        for (int i = 0; i < steps; i++) {
            const double t0 = now();
            trainer.step();
            ms.push_back(1000 * (now() - t0));
        }
        trainer.model.profile = nullptr;
        std::vector<double> sorted = ms;
        std::sort(sorted.begin(), sorted.end());
        const double median = sorted[sorted.size() / 2];
        const double tokens = double(batch_size) * T;
        const double flops = count_flops(c, T).training * tokens;
        const double gflops = flops / (median / 1000) / 1e9;
        // The library ceiling: the best backend's; the step ran on matmul_current().
        const MatmulBackend used = matmul_current();
        nlohmann::ordered_json library;
        double ceiling = 0;
        std::string best_backend;
        for (MatmulBackend b : matmul_backends()) {
            matmul_use(b);
            const double g = sgemm_ceiling_gflops();
            library[to_string(b)] = g;
            if (g > ceiling) ceiling = g, best_backend = to_string(b);
        }
        matmul_use(used);
        const double peak = peak_f32_gflops(threads), peak_bf16 = peak_bf16_gflops(threads);
        const double P = double(trainer.model.num_parameters);
        const double state_mib = 4.0 * double(trainer.state_floats()) / 1048576.0;
        const double acts_mib = 4.0 * double(trainer.activation_floats()) / 1048576.0;
        const double rss = peak_rss_mib();

        if (json) {
            nlohmann::ordered_json j = {{"preset", model.preset}, {"batch_size", batch_size}, {"block_size", T},
                                        {"dropout", c.dropout}, {"threads", threads}, {"batch_threads", batch_threads},
                                        {"dtype", dtype}, {"attention", attention}, {"recompute", recompute},
                                        {"parameters", P},
                                        {"ms_median", median}, {"ms_min", sorted.front()}, {"ms_max", sorted.back()},
                                        {"tokens_per_s", tokens / (median / 1000)}, {"gflops", gflops},
                                        {"matmul", to_string(used)}, {"matmul_bf16", to_string(matmul_bf16_backend())},
                                        {"library_gflops", library},
                                        {"sgemm_ceiling_gflops", ceiling}, {"ceiling_ratio", gflops / ceiling},
                                        {"peak_f32_gflops", peak}, {"peak_ratio", gflops / peak},
                                        {"peak_bf16_gflops", peak_bf16},
                                        {"peak_rss_mib", rss}, {"state_mib", state_mib}, {"activations_mib", acts_mib}};
            for (int bwd = 0; bwd < 2; bwd++)
                for (int k = 0; k < Profile::kKinds; k++)
                    j[bwd ? "backward_ms" : "forward_ms"][work_name(Work(k))] = 1000 * profile.seconds[bwd][k] / steps;
            fmt::print("{}\n", j.dump());
            return 0;
        }
        fmt::print("bench: preset {}, B={} T={} L={} C={} NH={} V={} dropout={}, {:.2f} M parameters\n", model.preset,
                   batch_size, T, c.n_layer, c.n_embd, c.n_head, c.vocab_size, c.dropout, P / 1e6);
        fmt::print("threads {}{}, SIMD {}, dtype {}, attention {}, recompute {}, {} timed steps after {} warm-up\n\n",
                   threads,
                   batch_threads > 1
                       ? fmt::format(" ({} batch threads of {} rows)", batch_threads, batch_size / batch_threads)
                       : "",
                   simd_current_target(),
                   tc.dtype == DType::BFloat16 ? dtype + " (products: " + matmul_bf16_describe() + ")" : dtype,
                   attention, recompute, steps, warmup);
        fmt::print("{}\n\n", matmul_line);
        fmt::print("  step time     {:.2f} ms median (min {:.2f}, max {:.2f})\n", median, sorted.front(),
                   sorted.back());
        fmt::print("  throughput    {:.0f} tokens/s\n", tokens / (median / 1000));
        fmt::print("  compute       {:.2f} GFLOP per step, {:.1f} GFLOP/s achieved\n", flops / 1e9, gflops);
        std::string others;
        for (auto& [name, g] : library.items())
            if (name != best_backend) others += fmt::format("; {} {:.1f}", name, g.get<double>());
        fmt::print("  library best  {:.1f} GFLOP/s ({}, 2048³ on {} threads{}): the step at {:.0f} % of it\n", ceiling,
                   best_backend, threads, others, 100 * gflops / ceiling);
        fmt::print(
            "  machine peak  {:.1f} GFLOP/s f32 (independent FMAs, {}, {} threads): the step at {:.0f} % of it\n", peak,
            simd_current_target(), threads, 100 * gflops / peak);
        if (peak_bf16 > 0) fmt::print("                {:.1f} GFLOP/s bf16 (AVX512_BF16 dot products)\n", peak_bf16);
        else fmt::print("                bf16: this CPU has no bf16 dot product instruction\n");
        fmt::print(
            "  memory        peak RSS {:.0f} MiB; params+grads+2 moments {:.0f} MiB, activations+scratch {:.0f} "
            "MiB\n\n",
            rss, state_mib, acts_mib);
        fmt::print("  {:<30} {:>10} {:>10} {:>8}\n", "where the time goes (ms)", "forward", "backward", "share");
        double total = 0;
        for (auto& col : profile.seconds)
            for (double s : col) total += s;
        for (int k = 0; k < Profile::kKinds; k++) {
            const double f = profile.seconds[0][k], b = profile.seconds[1][k];
            if (f + b == 0) continue;
            fmt::print("  {:<30} {:>10.2f} {:>10.2f} {:>7.1f} %\n", work_name(Work(k)), 1000 * f / steps,
                       1000 * b / steps, 100 * (f + b) / total);
        }
        return 0;
    });
}

// bench_sample — how fast generation is, with and without the KV cache (lib/model/generate.h).
//
//   build/bench_sample --preset=course --num_samples=1 --max_new_tokens=200 --kv_cache=1
//   build/bench_sample --preset=gpt2 --block_size=256 --num_samples=4 --kv_cache=0
//
// A model of the preset's shape with random weights (speed does not depend on the weights),
// a prompt of --prompt_len random tokens, then --max_new_tokens steps of build/sample's
// generator, timed on the wall clock and on the process's CPU clock. Prints the generated tokens
// per second, all samples counted, and the time of the first step (the prompt) and of the others
// apart. With --threads=1 the CPU time is what the run takes on a core of its own, which a wall
// clock on a machine shared with other work overstates.
#include <cblas.h>
#include <omp.h>

#include <chrono>
#include <ctime>

#include "apps/flags.h"
#include "lib/model/generate.h"

using namespace hg;

static double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static double cpu_now() {  // seconds of CPU time used by this process, all threads
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

int main(int argc, char** argv) {
    CLI::App app{"handgrad bench_sample: tokens/s of generation, with and without the KV cache"};
    ModelFlags model_flags;
    model_flags.add(app);
    int num_samples = 1, max_new_tokens = 200, prompt_len = 1, threads = 1, kv_cache = 1;
    app.add_option("--num_samples", num_samples, "sequences generated together")->capture_default_str();
    app.add_option("--max_new_tokens", max_new_tokens)->capture_default_str();
    app.add_option("--prompt_len", prompt_len, "random prompt tokens")->capture_default_str();
    app.add_option("--threads", threads)->capture_default_str();
    MatmulFlag matmul;
    matmul.add(app);
    app.add_option("--kv_cache", kv_cache, "1: the cached forward; 0: recompute the context")->capture_default_str();
    return run_app(app, argc, argv, [&] {
        check(num_samples >= 1, "--num_samples must be positive (got {})", num_samples);
        check(max_new_tokens >= 1, "--max_new_tokens must be positive (got {})", max_new_tokens);
        check(prompt_len >= 1, "--prompt_len must be positive (got {})", prompt_len);
        check(threads >= 1, "--threads must be positive (got {})", threads);
        check(kv_cache == 0 || kv_cache == 1, "--kv_cache must be 0 or 1 (got {})", kv_cache);
        matmul.validate();
        omp_set_num_threads(threads);
        openblas_set_num_threads(threads);
        const GPTConfig c = model_flags.config();
        const std::string matmul_line = matmul.apply_forward(c, num_samples, c.block_size, threads);
        GPT<float> model;
        gpt_build(model, c, 1, 1);
        gpt_init(model, 1);
        Rng rng(2);
        std::vector<int> prompt(prompt_len);
        for (int& t : prompt) t = int(rng.below(c.vocab_size));
        GenerateConfig gen;
        gen.num_samples = num_samples, gen.kv_cache = kv_cache == 1;
        Generator g;
        g.start(model, gen, prompt, max_new_tokens);
        const double t0 = now(), cpu0 = cpu_now();
        g.step();
        const double t1 = now();
        for (int i = 1; i < max_new_tokens; i++) g.step();
        const double t2 = now(), cpu2 = cpu_now();
        const double tokens = double(num_samples) * max_new_tokens;
        fmt::print("bench_sample: preset {} (L={} C={} V={} block_size={}), {} sample(s), prompt {}, {} new tokens, "
                   "kv_cache={}{}, threads {}\n",
                   model_flags.preset, c.n_layer, c.n_embd, c.vocab_size, c.block_size, num_samples, prompt_len,
                   max_new_tokens, kv_cache, g.uses_kv_cache() ? "" : " (full recompute)", threads);
        fmt::print("  {}\n", matmul_line);
        fmt::print("  {:.1f} tokens/s: {:.3f} s in all, first step {:.1f} ms, later steps {:.2f} ms each\n",
                   tokens / (t2 - t0), t2 - t0, 1000 * (t1 - t0),
                   max_new_tokens > 1 ? 1000 * (t2 - t1) / (max_new_tokens - 1) : 0.0);
        fmt::print("  {:.1f} tokens per CPU second: {:.3f} s of CPU time\n", tokens / (cpu2 - cpu0), cpu2 - cpu0);
        return 0;
    });
}

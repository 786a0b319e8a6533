// sample — nanoGPT's sample.py: generate text from a trained checkpoint.
//
//   build/sample --out_dir=out-shakespeare-char --start="ROMEO:" --num_samples=2 --max_new_tokens=300
//   build/sample --ckpt=model.safetensors --start=FILE:prompt.txt --temperature=0 (greedy)
//   build/sample --kv_cache=0 ...   (recompute the whole context for every token, for comparison)
#include <omp.h>
#include <cblas.h>

#include <filesystem>

#include "apps/flags.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/model/generate.h"
#include "lib/model/sample.h"
#include "lib/text/text_file.h"
#include "lib/text/tokenizer_by_name.h"

using namespace hg;

int main(int argc, char** argv) {
    CLI::App app{"handgrad sample: generate text from a checkpoint"};
    std::string out_dir = "out-shakespeare-char", ckpt, start = "\n";
    int num_samples = 1, max_new_tokens = 500, top_k = 200, threads = 1, kv_cache = 1;
    float temperature = 0.8f;
    uint64_t seed = 1337;
    TokenizerFlags tokenizer;
    app.add_option("--out_dir", out_dir, "reads out_dir/ckpt.safetensors")->capture_default_str();
    app.add_option("--ckpt", ckpt, "a checkpoint file (instead of --out_dir)");
    app.add_option("--start", start, "the prompt, or FILE:path to read it from a file");
    app.add_option("--num_samples", num_samples)->capture_default_str();
    app.add_option("--max_new_tokens", max_new_tokens)->capture_default_str();
    app.add_option("--temperature", temperature, "0: greedy (the most likely token, no randomness)")
        ->capture_default_str();
    app.add_option("--top_k", top_k, "keep the k most likely tokens (0: all)")->capture_default_str();
    app.add_option("--seed", seed)->capture_default_str();
    app.add_option("--threads", threads)->capture_default_str();
    app.add_option("--kv_cache", kv_cache, "1: keep past keys and values (lib/model/infer.h); 0: recompute the context")
        ->capture_default_str();
    tokenizer.add(app, "the checkpoint's");
    MatmulFlag matmul;
    matmul.add(app);
    return run_app(app, argc, argv, [&] {
        check(num_samples >= 1, "--num_samples must be positive (got {})", num_samples);
        check(max_new_tokens >= 0, "--max_new_tokens must be >= 0 (got {})", max_new_tokens);
        check_threads(threads, /*zero_is_default=*/false);
        check_sampling_knobs(temperature, top_k);
        check(kv_cache == 0 || kv_cache == 1, "--kv_cache must be 0 or 1 (got {})", kv_cache);
        matmul.validate();
        omp_set_num_threads(threads);
        openblas_set_num_threads(threads);
        if (ckpt.empty()) ckpt = (std::filesystem::path(out_dir) / "ckpt.safetensors").string();
        if (start.rfind("FILE:", 0) == 0) start = read_text_file(start.substr(5));
        const Checkpoint ck = Checkpoint::load(ckpt);
        const auto tok = checkpoint_tokenizer(ck.tokenizer, ck.vocab, tokenizer.name, tokenizer.gpt2_dir);
        const std::vector<int> prompt = tok->encode(start);
        check(!prompt.empty(), "--start is empty: give at least one character");
        // The output is the samples alone: which backend ran is not printed.
        matmul.apply_forward(ck.config, num_samples, ck.config.block_size, threads);
        GPT<float> model;  // its weights only: the generator brings the working space it needs
        gpt_build(model, ck.config, 1, 1);
        ck.read_weights(model);
        GenerateConfig gen;
        gen.num_samples = num_samples;
        gen.temperature = temperature;
        gen.top_k = top_k;
        gen.seed = seed;
        gen.kv_cache = kv_cache == 1;
        Generator g;
        g.start(model, gen, prompt, max_new_tokens);
        if (!g.fallback_reason().empty())
            fmt::print(stderr, "note: the KV cache does not support {}; recomputing the whole context per token\n",
                       g.fallback_reason());
        for (int i = 0; i < max_new_tokens; i++) g.step();
        for (int s = 0; s < num_samples; s++) {
            // Decoded at once: a gpt2 token may hold part of a character, completed by the next.
            const int* generated = g.sequence(s) + prompt.size();
            fmt::print("{}{}\n---------------\n", start, tok->decode(generated, size_t(g.length()) - prompt.size()));
        }
        return 0;
    });
}

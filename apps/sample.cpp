// sample — nanoGPT's sample.py: generate text from a trained checkpoint.
//
//   build/sample --out_dir=out-shakespeare-char --start="ROMEO:" --num_samples=2 --max_new_tokens=300
//   build/sample --ckpt=model.safetensors --start=FILE:prompt.txt --temperature=0 (greedy)
#include <omp.h>
#include <cblas.h>

#include <filesystem>

#include "apps/flags.h"
#include "lib/checkpoint.h"
#include "lib/data.h"
#include "lib/sample.h"

using namespace hg;

int main(int argc, char** argv) {
    CLI::App app{"handgrad sample: generate text from a checkpoint"};
    std::string out_dir = "out-shakespeare-char", ckpt, start = "\n";
    int num_samples = 1, max_new_tokens = 500, top_k = 200, threads = 1;
    float temperature = 0.8f;
    uint64_t seed = 1337;
    TokenizerFlags tokenizer;
    app.add_option("--out_dir", out_dir, "reads out_dir/ckpt.safetensors")->capture_default_str();
    app.add_option("--ckpt", ckpt, "a checkpoint file (instead of --out_dir)");
    app.add_option("--start", start, "the prompt, or FILE:path to read it from a file");
    app.add_option("--num_samples", num_samples)->capture_default_str();
    app.add_option("--max_new_tokens", max_new_tokens)->capture_default_str();
    app.add_option("--temperature", temperature, "0: greedy")->capture_default_str();
    app.add_option("--top_k", top_k, "keep the k most likely tokens (0: all)")->capture_default_str();
    app.add_option("--seed", seed)->capture_default_str();
    app.add_option("--threads", threads)->capture_default_str();
    tokenizer.add(app, "the checkpoint's");
    return run_app(app, argc, argv, [&] {
        check(num_samples >= 1, "--num_samples must be positive (got {})", num_samples);
        check(max_new_tokens >= 0, "--max_new_tokens must be >= 0 (got {})", max_new_tokens);
        check(threads >= 1, "--threads must be positive (got {})", threads);
        omp_set_num_threads(threads);
        openblas_set_num_threads(threads);
        if (ckpt.empty()) ckpt = (std::filesystem::path(out_dir) / "ckpt.safetensors").string();
        if (start.rfind("FILE:", 0) == 0) start = read_text_file(start.substr(5));
        const Checkpoint ck = Checkpoint::load(ckpt);
        const auto tok = checkpoint_tokenizer(ck.tokenizer, ck.vocab, tokenizer.name, tokenizer.gpt2_dir);
        const std::vector<int> prompt = tok->encode(start);
        check(!prompt.empty(), "--start is empty: give at least one character");
        const int T = ck.config.block_size, V = ck.config.vocab_size;
        GPT<float> model;
        gpt_build(model, ck.config, 1, T);
        ck.read_weights(model);
        Rng rng(seed);
        for (int s = 0; s < num_samples; s++) {
            std::vector<int> ids = prompt;
            ids.reserve(prompt.size() + max_new_tokens);
            for (int i = 0; i < max_new_tokens; i++) {
                // The context is cropped to the last block_size tokens: the position table has no more rows.
                const int n = std::min<int>(int(ids.size()), T);
                gpt_forward(model, ids.data() + ids.size() - n, nullptr, 1, n);
                const int next = sample_token(model.acts.logits + size_t(n - 1) * V, V, temperature, top_k, rng);
                ids.push_back(next);
            }
            // Decoded at once: a gpt2 token may hold part of a character, completed by the next.
            fmt::print("{}{}\n---------------\n", start, tok->decode(ids.data() + prompt.size(), ids.size() - prompt.size()));
        }
        return 0;
    });
}

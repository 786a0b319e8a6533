// eval — the mean cross-entropy of a checkpoint on a text, over every non-overlapping window.
//
//   build/eval --ckpt=out-shakespeare-char/ckpt.safetensors --text=some.txt [--json]
//   build/eval --ckpt=... --data=data/tinyshakespeare/input.txt --split=val
//
// Windows start at i = 0, T, 2T, ... with i + T + 1 <= len: inputs text[i : i+T], targets
// text[i+1 : i+T+1]. The loss is the mean over all those targets, in nats and bits per character.
#include <omp.h>
#include <cblas.h>
#include <nlohmann/json.hpp>

#include <cmath>

#include "apps/flags.h"
#include "lib/checkpoint.h"
#include "lib/data.h"

using namespace hg;

int main(int argc, char** argv) {
    CLI::App app{"handgrad eval: loss of a checkpoint on a text"};
    std::string ckpt, text_path, data_path, split_name = "val";
    int batch_size = 16, threads = 0;
    bool json = false;
    app.add_option("--ckpt", ckpt, "checkpoint file")->required();
    app.add_option("--text", text_path, "score this whole file");
    app.add_option("--data", data_path, "score one split of this file (the 90/10 split of train)");
    app.add_option("--split", split_name, "val | train, with --data")->capture_default_str();
    app.add_option("--batch_size", batch_size, "windows per forward pass")->capture_default_str();
    app.add_option("--threads", threads);
    app.add_flag("--json", json, "print {\"loss\": ..., \"bits_per_char\": ..., \"tokens\": ...}");
    return run_app(app, argc, argv, [&] {
        check(text_path.empty() != data_path.empty(), "give exactly one of --text or --data");
        check(split_name == "val" || split_name == "train", "--split must be val or train (got '{}')", split_name);
        check(batch_size >= 1, "--batch_size must be positive (got {})", batch_size);
        if (threads > 0) omp_set_num_threads(threads);
        openblas_set_num_threads(omp_get_max_threads());
        const Checkpoint ck = Checkpoint::load(ckpt);
        const Tokenizer tok = Tokenizer::from_vocab(ck.vocab);
        std::vector<int> ids = tok.encode(read_text_file(text_path.empty() ? data_path : text_path));
        if (!data_path.empty()) {
            Split s = split_train_val(ids);
            ids = split_name == "val" ? s.val : s.train;
        }
        const int T = ck.config.block_size;
        const size_t windows = eval_windows(ids.size(), T);
        check(windows > 0, "the text has {} tokens; block_size {} needs at least {}", ids.size(), T, T + 1);
        GPT<float> model;
        gpt_build(model, ck.config, batch_size, T);
        ck.read_weights(model);
        std::vector<int> idx(size_t(batch_size) * T), targets(size_t(batch_size) * T);
        double sum = 0;  // Σ of per-token losses
        for (size_t w0 = 0; w0 < windows; w0 += batch_size) {
            const int B = int(std::min<size_t>(batch_size, windows - w0));
            for (int b = 0; b < B; b++) {
                const size_t i = (w0 + b) * T;
                std::copy(ids.begin() + i, ids.begin() + i + T, idx.begin() + size_t(b) * T);
                std::copy(ids.begin() + i + 1, ids.begin() + i + T + 1, targets.begin() + size_t(b) * T);
            }
            sum += gpt_forward(model, idx.data(), targets.data(), B, T) * B * T;
        }
        const size_t tokens = windows * T;
        const double loss = sum / tokens;
        if (json) {
            fmt::print("{}\n", nlohmann::json{{"loss", loss}, {"bits_per_char", loss / std::log(2.0)}, {"tokens", tokens}}.dump());
        } else {
            fmt::print("loss {:.4f} nats/char, {:.4f} bits/char over {} tokens ({} windows of {})\n", loss,
                       loss / std::log(2.0), tokens, windows, T);
        }
        return 0;
    });
}

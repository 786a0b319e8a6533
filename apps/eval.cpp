// eval — the mean cross-entropy of a checkpoint on a text, over every non-overlapping window.
//
//   build/eval --ckpt=out-shakespeare-char/ckpt.safetensors --text=some.txt [--json]
//   build/eval --ckpt=... --data=data/tinyshakespeare/input.txt --split=val
//
// The windows are lib/evaluate.h's: non-overlapping, each target scored once; the loss is their
// mean, in nats and bits per character.
#include <omp.h>
#include <cblas.h>
#include <nlohmann/json.hpp>

#include <cmath>

#include "apps/flags.h"
#include "lib/checkpoint.h"
#include "lib/data.h"
#include "lib/evaluate.h"
#include "lib/memory_check.h"

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
        check_threads(threads, /*zero_is_default=*/true);
        if (threads > 0) omp_set_num_threads(threads);
        openblas_set_num_threads(omp_get_max_threads());
        const Checkpoint ck = Checkpoint::load(ckpt);
        const Tokenizer tok = Tokenizer::from_vocab(ck.vocab);
        std::vector<int> ids = tok.encode(read_text_file(text_path.empty() ? data_path : text_path));
        if (!data_path.empty()) {
            Split s = split_train_val(ids);
            ids = split_name == "val" ? s.val : s.train;
        }
        check_memory_available(memory_need(ck.config, batch_size, ck.config.block_size, 1, 1));
        GPT<float> model;
        gpt_build(model, ck.config, batch_size, ck.config.block_size);
        ck.read_weights(model);
        const WindowLoss w = windowed_loss(model, ids);
        if (json) {
            fmt::print("{}\n", nlohmann::json{{"loss", w.loss}, {"bits_per_char", w.loss / std::log(2.0)},
                                              {"tokens", w.tokens}}.dump());
        } else {
            fmt::print("loss {:.4f} nats/char, {:.4f} bits/char over {} tokens ({} windows of {})\n", w.loss,
                       w.loss / std::log(2.0), w.tokens, w.windows, w.T);
        }
        return 0;
    });
}

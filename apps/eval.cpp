// eval — the mean cross-entropy of a checkpoint on a text, over every non-overlapping window.
//
//   build/eval --ckpt=out-shakespeare-char/ckpt.safetensors --text=some.txt [--json]
//   build/eval --ckpt=... --data=data/tinyshakespeare/input.txt --split=val
//
//   build/eval --ckpt=gpt2.safetensors --data=data/tinyshakespeare/input.txt   (its gpt2 tokenizer)
//   build/eval --ckpt=... --data=DIR --split=val      (token files: build/prepare's shards, nanoGPT's .bin;
//                                                      read from disk, the same windows as over a text's split)
//
// The windows are lib/train/evaluate.h's: non-overlapping, each target scored once; the loss is their
// mean in nats per token, and in bits per character (tokens of different tokenizers cover
// different amounts of text; characters are the same for all). The text is encoded with the
// checkpoint's tokenizer; --tokenizer, if given, must name it.
#include <omp.h>
#include <cblas.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <optional>

#include "apps/flags.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/data/dataset.h"
#include "lib/data/shards.h"
#include "lib/model/memory_check.h"
#include "lib/text/text_file.h"
#include "lib/text/tokenizer_by_name.h"
#include "lib/train/evaluate.h"

using namespace hg;

int main(int argc, char** argv) {
    CLI::App app{"handgrad eval: loss of a checkpoint on a text"};
    std::string ckpt, text_path, data_path, split_name = "val";
    int batch_size = 16, threads = 0;
    bool json = false;
    TokenizerFlags tokenizer;
    app.add_option("--ckpt", ckpt, "checkpoint file")->required();
    app.add_option("--text", text_path, "score this whole file");
    app.add_option("--data", data_path, "score one split of this file (the 90/10 split of train), or of token "
                   "files (a directory or glob, as train's --data)");
    app.add_option("--split", split_name, "val | train, with --data")->capture_default_str();
    app.add_option("--batch_size", batch_size, "windows per forward pass")->capture_default_str();
    app.add_option("--threads", threads);
    app.add_flag("--json", json, "print {\"loss\": (nats per token), \"bits_per_char\": ..., \"tokens\": ..., "
                                 "\"characters\": ...}");
    tokenizer.add(app, "the checkpoint's");
    MatmulFlag matmul;
    matmul.add(app);
    return run_app(app, argc, argv, [&] {
        check(text_path.empty() != data_path.empty(), "give exactly one of --text or --data");
        check(split_name == "val" || split_name == "train", "--split must be val or train (got '{}')", split_name);
        check(batch_size >= 1, "--batch_size must be positive (got {})", batch_size);
        check_threads(threads, /*zero_is_default=*/true);
        matmul.validate();
        if (threads > 0) omp_set_num_threads(threads);
        openblas_set_num_threads(omp_get_max_threads());
        const Checkpoint ck = Checkpoint::load(ckpt);
        const auto tok = checkpoint_tokenizer(ck.tokenizer, ck.vocab, tokenizer.name, tokenizer.gpt2_dir);
        std::vector<int> text_ids;
        std::optional<TokenData> files;
        TokenView ids;
        if (!data_path.empty() && is_token_data_path(data_path)) {
            files.emplace(open_token_data(data_path, /*need_train=*/split_name == "train"));
            check_same_tokenizer(*files, ck.tokenizer, ck.vocab, "the checkpoint's model");
            ids = split_name == "val" ? files->val.view : files->train.view;
        } else {
            const std::string text = read_text_file(text_path.empty() ? data_path : text_path);
            if (data_path.empty()) {
                text_ids = tok->encode(text);
            } else {
                Split s = split_text(text, *tok);
                text_ids = split_name == "val" ? std::move(s.val) : std::move(s.train);
            }
            ids = text_ids;
        }
        check_memory_available(memory_need(ck.config, batch_size, ck.config.block_size, 1, 1));
        matmul.apply_forward(ck.config, batch_size, ck.config.block_size, omp_get_max_threads());
        GPT<float> model;
        gpt_build(model, ck.config, batch_size, ck.config.block_size);
        ck.read_weights(model);
        WindowLoss w = windowed_loss(model, ids);
        count_scored_characters(w, ids, *tok);
        if (json) {
            fmt::print("{}\n", nlohmann::json{{"loss", w.loss}, {"bits_per_char", w.bits_per_char()},
                                              {"tokens", w.tokens}, {"characters", w.characters}}.dump());
        } else {
            fmt::print(
                "loss {:.4f} nats/token, {:.4f} bits/char over {} tokens, {} characters ({} tokenizer; {} "
                "windows of {})\n",
                w.loss, w.bits_per_char(), w.tokens, w.characters, tok->name(), w.windows, w.T);
        }
        return 0;
    });
}

// logits — one forward pass of a checkpoint on token ids, the logits written as a safetensors
// file: the numbers a reference implementation compares (tools/crosscheck.py hf, for converted
// Hugging Face GPT-2 models).
//
//   build/tokenize --tokenizer=gpt2 <<< "Hello, world" | build/logits --ckpt=gpt2.safetensors --out=logits.safetensors
//
// Reads 1 to block_size token ids on stdin, whitespace-separated as build/tokenize prints them,
// and writes "ids" (I64, (T)) and "logits" (F32, (T, V)): row t is the model's scores for the
// token after ids[0..t].
#include <omp.h>
#include <cblas.h>

#include "apps/flags.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/text/tokenizer.h"

using namespace hg;

int main(int argc, char** argv) {
    CLI::App app{"handgrad logits: token ids on stdin -> one forward pass's logits, as safetensors"};
    std::string ckpt, out;
    int threads = 0;
    app.add_option("--ckpt", ckpt, "the checkpoint")->required();
    app.add_option("--out", out, "write ids and logits here (safetensors)")->required();
    app.add_option("--threads", threads);
    MatmulFlag matmul;
    matmul.add(app);
    return run_app(app, argc, argv, [&] {
        matmul.validate();
        if (threads > 0) omp_set_num_threads(threads);
        openblas_set_num_threads(omp_get_max_threads());
        const Checkpoint ck = Checkpoint::load(ckpt);
        const int V = ck.config.vocab_size, T = ck.config.block_size;
        const std::vector<int> ids = parse_ids(read_stdin(), V);
        check(!ids.empty() && int(ids.size()) <= T, "give 1 to block_size = {} token ids on stdin (got {})", T,
              ids.size());
        for (size_t i = 0; i < ids.size(); i++)
            check(ids[i] >= 0 && ids[i] < V, "token id {} at position {} is outside the vocabulary [0, {})", ids[i],
                  i, V);
        matmul.apply_forward(ck.config, 1, int(ids.size()), omp_get_max_threads());
        GPT<float> model;
        gpt_build(model, ck.config, 1, int(ids.size()));
        ck.read_weights(model);
        gpt_forward(model, ids.data(), nullptr, 1, int(ids.size()));
        const std::vector<int64_t> ids64(ids.begin(), ids.end());
        SafetensorsWriter w;
        w.add("ids", Dtype::I64, {ids.size()}, ids64.data());
        w.add("logits", Dtype::F32, {ids.size(), size_t(V)}, model.acts.logits);
        w.save(out);
        fmt::print("wrote {}: logits of {} tokens over {} ids\n", out, ids.size(), V);
        return 0;
    });
}

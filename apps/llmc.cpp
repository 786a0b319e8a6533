// llmc — handgrad's GPT-2 to and from llm.c's files (lib/checkpoint/llmc_model.h, llmc_state.h).
//
//   build/llmc export --ckpt=out/ckpt.safetensors --out=gpt2_124M.bin   a checkpoint's weights
//   build/llmc export --preset=gpt2 --gelu=tanh --seed=1 --out=m.bin    a fresh model (model flags)
//   build/llmc import --model=gpt2_124M.bin --out=ckpt.safetensors       an llm.c model, as a checkpoint
//   build/llmc debug-state --model=m.bin --out=gpt2_124M_debug_state.bin --batch_size=4 --block_size=64
//   build/llmc loss --model=m.bin --ids=val.txt --batch_size=4 --block_size=64 --batches=5
//
// debug-state runs handgrad's forward and backward on the model file's weights and writes what
// llm.c's test_gpt2.c compares its own against (tools/llmc_check.sh). Its batch is the first
// B·T + 1 ids of --ids (as build/tokenize writes them), or random ids from --seed. loss is the
// mean loss over consecutive batches of --ids, in the order llm.c's validation loader reads a
// token file: batch b is ids [b·B·T, (b + 1)·B·T + 1).
#include <omp.h>

#include <fstream>

#include "apps/flags.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/checkpoint/llmc_model.h"
#include "lib/checkpoint/llmc_state.h"
#include "lib/core/rng.h"
#include "lib/optim/adamw.h"

using namespace hg;

// Token ids, whitespace-separated, each in [0, V).
static std::vector<int> read_ids(const std::string& path, int V) {
    std::ifstream f(path);
    check(f.good(), "cannot open {}", path);
    std::vector<int> ids;
    long long id;
    while (f >> id) {
        check(id >= 0 && id < V, "{}: token id {} outside the vocabulary [0, {})", path, id, V);
        ids.push_back(int(id));
    }
    check(f.eof(), "{}: not a list of token ids (after {} ids)", path, ids.size());
    return ids;
}

// A model built for batches of (B, T) with an llm.c file's weights; returns the file's Vp.
static int load_model(GPT<float>& model, const std::string& path, int B, int T) {
    const LlmcModel file = LlmcModel::load(path);
    check(T <= file.max_T, "--block_size={} is longer than the model's maxT = {}", T, file.max_T);
    gpt_build(model, file.config(), B, T);
    file.read_weights(model);
    return file.Vp;
}

// The losses of llm.c's test_gpt2.c on one batch: before each of `steps` AdamW steps of its
// update (lr 1e-4, β 0.9 and 0.999, eps 1e-8, weight decay 0.01 on every parameter, no clipping).
static std::vector<double> test_gpt2_losses(GPT<float>& model, const std::vector<int>& ids, int steps) {
    const size_t P = model.num_parameters;
    std::vector<float> m(P, 0.0f), v(P, 0.0f);
    const std::vector<ParamSpan> all{{0, P, true}};
    const AdamWConfig adamw{0.9f, 0.999f, 1e-8f, 0.01f};
    std::vector<double> losses;
    for (int step = 1; step <= steps; step++) {
        gpt_zero_grad(model);
        losses.push_back(gpt_forward(model, ids.data(), ids.data() + 1, model.B, model.T));
        gpt_backward(model);
        adamw_step(model.params_memory.data(), model.grads_memory.data(), m.data(), v.data(), all, 1e-4f, adamw, step);
    }
    return losses;
}

int main(int argc, char** argv) {
    CLI::App app{"handgrad llmc: GPT-2 models to and from llm.c's model file; its debug state"};
    app.require_subcommand(1);
    std::string ckpt, model_path, out, ids_path;
    int B = 4, T = 64, batches = 5, steps = 0;
    uint64_t seed = 1337;

    CLI::App* exp = app.add_subcommand("export", "write an llm.c model file from a checkpoint or a fresh model");
    ModelFlags model_flags;
    model_flags.add(*exp);
    exp->add_option("--ckpt", ckpt, "a checkpoint (else a fresh model from the model flags and --seed)");
    exp->add_option("--seed", seed, "the fresh model's initialisation")->capture_default_str();
    exp->add_option("--out", out, "the llm.c model file to write")->required();

    CLI::App* imp = app.add_subcommand("import", "write a checkpoint from an llm.c model file (GPT-2's vocabulary)");
    imp->add_option("--model", model_path, "an llm.c model file")->required();
    imp->add_option("--out", out, "the checkpoint to write")->required();

    CLI::App* state =
        app.add_subcommand("debug-state", "write llm.c's debug state from handgrad's forward and backward");
    state->add_option("--model", model_path, "an llm.c model file")->required();
    state->add_option("--out", out, "the debug state to write")->required();
    state->add_option("--ids", ids_path, "token ids (else random ids from --seed)");
    state->add_option("--seed", seed)->capture_default_str();
    state->add_option("--steps", steps, "then this many of test_gpt2.c's AdamW steps on the batch, printing each loss");

    CLI::App* loss = app.add_subcommand("loss", "the mean loss over consecutive batches of a token list");
    loss->add_option("--model", model_path, "an llm.c model file")->required();
    loss->add_option("--ids", ids_path, "token ids (build/tokenize's output)")->required();
    loss->add_option("--batches", batches, "how many batches")->capture_default_str();
    for (CLI::App* sub : {state, loss}) {
        sub->add_option("--batch_size", B, "B")->capture_default_str();
        sub->add_option("--block_size", T, "T, up to the model's maxT")->capture_default_str();
    }
    MatmulFlag matmul;  // the subcommands that run the model
    matmul.add(*state);
    matmul.add(*loss);

    return run_app(app, argc, argv, [&] {
        check(B >= 1 && T >= 1 && batches >= 1, "--batch_size, --block_size and --batches must be positive");
        matmul.validate();
        if (exp->parsed()) {
            GPT<float> model;
            if (ckpt.empty()) {
                gpt_build(model, model_flags.config(), 1, 1);
                gpt_init(model, seed);
            } else {
                const Checkpoint ck = Checkpoint::load(ckpt);
                gpt_build(model, ck.config, 1, 1);
                ck.read_weights(model);
            }
            save_llmc_model(out, model);
            const GPTConfig& c = model.config;
            fmt::print("wrote {}: maxT {}, V {} (padded {}), L {}, NH {}, C {}; {} parameters\n", out, c.block_size,
                       c.vocab_size, llmc_padded_vocab(c.vocab_size), c.n_layer, c.n_head, c.n_embd,
                       model.num_parameters);
        } else if (imp->parsed()) {
            GPT<float> model;
            load_model(model, model_path, 1, 1);
            check(model.config.vocab_size == 50257, "{}: V = {}; a checkpoint needs a tokenizer, and only GPT-2's "
                  "vocabulary of 50257 has one without a vocabulary list", model_path, model.config.vocab_size);
            save_checkpoint(out, model, {}, TrainProgress{}, nullptr, nullptr, "gpt2");
            fmt::print("wrote {}: {} parameters\n", out, model.num_parameters);
        } else if (state->parsed()) {
            GPT<float> model;
            const int Vp = load_model(model, model_path, B, T);
            matmul.apply_forward(model.config, B, T, omp_get_max_threads());
            const size_t N = size_t(B) * T;
            std::vector<int> ids;
            if (!ids_path.empty()) {
                ids = read_ids(ids_path, model.config.vocab_size);
                check(ids.size() > N, "{}: {} ids; a batch of {} × {} needs {}", ids_path, ids.size(), B, T, N + 1);
            } else {
                Rng rng(seed);
                for (size_t i = 0; i <= N; i++) ids.push_back(int(rng.below(model.config.vocab_size)));
            }
            gpt_zero_grad(model);
            const double l = gpt_forward(model, ids.data(), ids.data() + 1, B, T);
            gpt_backward(model);
            save_llmc_state(out, model, Vp);
            fmt::print("wrote {}: B {}, T {}, loss {:.6f}\n", out, B, T, l);
            if (steps > 0) fmt::print("steps: {}\n", fmt::join(test_gpt2_losses(model, ids, steps), " "));
        } else {
            GPT<float> model;
            load_model(model, model_path, B, T);
            matmul.apply_forward(model.config, B, T, omp_get_max_threads());
            const std::vector<int> ids = read_ids(ids_path, model.config.vocab_size);
            const size_t N = size_t(B) * T;
            check(ids.size() >= batches * N + 1, "{}: {} ids; {} batches of {} × {} need {}", ids_path, ids.size(),
                  batches, B, T, batches * N + 1);
            double sum = 0;
            for (int b = 0; b < batches; b++) {
                const int* x = ids.data() + b * N;
                const double l = gpt_forward(model, x, x + 1, B, T);
                fmt::print("batch {}: loss {:.6f}\n", b, l);
                sum += l;
            }
            fmt::print("mean loss {:.6f} over {} batches of {} × {}\n", sum / batches, batches, B, T);
        }
        return 0;
    });
}

// activations — what a model does with one prompt, as JSON for the pictures (tools/plot.py):
//
//   attention       every head of every layer: the attention probabilities (L, NH, T, T),
//                   row t = query position t, column s = key position s (0 above the diagonal)
//   logits          (T, V) for the prompt
//   delta_logits    (T, V) |logits after changing the last token − logits before|: causality
//                   says every row but the last is exactly 0
//   residual_norms  ‖H⁽ˡ⁾‖ for l = 0..L (embeddings, then each block's output), as loaded and
//                   with both residual projections scaled by 1/√(2L) (lib/model/probe.h)
//
// The model is a checkpoint's, or (--fresh_init) freshly drawn weights with that checkpoint's
// config and vocabulary, e.g. to see the residual stream at init:
//
//   build/activations --ckpt=out-shakespeare-char/ckpt.safetensors --prompt="ROMEO:" --out=acts.json
//   build/activations --ckpt=out-shakespeare-char/ckpt.safetensors --fresh_init=lesson14 --out=init.json
//
// A prompt longer than block_size is refused, or with --crop keeps its last block_size
// characters, the context sample would give the model (as tools/plot.py asks).
#include <nlohmann/json.hpp>
#include <omp.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

#include "apps/flags.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/model/probe.h"
#include "lib/text/char_tokenizer.h"

using namespace hg;
using json = nlohmann::ordered_json;

// rows × cols floats as a JSON array of rows.
static json matrix_json(const float* a, size_t rows, size_t cols) {
    json out = json::array();
    for (size_t i = 0; i < rows; i++) out.push_back(std::vector<float>(a + i * cols, a + (i + 1) * cols));
    return out;
}

int main(int argc, char** argv) {
    CLI::App app{"handgrad activations: attention, logits and residual norms of a checkpoint for a prompt, as JSON"};
    std::string ckpt, out, fresh_init, change_to;
    std::string prompt = "ROMEO:\nBut soft, what light through yonder window breaks?";
    uint64_t seed = 14;
    bool crop = false;
    app.add_option("--ckpt", ckpt, "the checkpoint (its config and vocabulary; its weights unless --fresh_init)")
        ->required();
    app.add_option("--prompt", prompt, "the text to run (at most block_size characters)")->capture_default_str();
    app.add_flag("--crop", crop, "a longer prompt keeps its last block_size characters (as sample's context)");
    app.add_option("--change_to", change_to, "the character the last one is changed to for delta_logits "
                                             "(default: the token V/2 ids away)");
    app.add_option("--fresh_init", fresh_init, "ignore the checkpoint's weights: draw new ones with this init "
                                               "(gpt2 | pytorch | lesson14 | lesson14-scaled)");
    app.add_option("--seed", seed, "the seed for --fresh_init")->capture_default_str();
    app.add_option("--out", out, "write the JSON here (default: standard output)");
    MatmulFlag matmul;
    matmul.add(app);
    return run_app(app, argc, argv, [&] {
        matmul.validate();
        const Checkpoint ck = Checkpoint::load(ckpt);
        GPTConfig c = ck.config;
        if (!fresh_init.empty()) c.init = parse_init(fresh_init);
        const Tokenizer tok = Tokenizer::from_vocab(ck.vocab);
        std::vector<int> ids = tok.encode(prompt);
        if (crop && int(ids.size()) > c.block_size) {
            ids.erase(ids.begin(), ids.end() - c.block_size);
            prompt = tok.decode(ids.data(), ids.size());
        }
        const int T = int(ids.size()), V = c.vocab_size, L = c.n_layer, NH = c.n_head;
        check(T >= 1 && T <= c.block_size,
              "the prompt has {} characters; it must have 1 to block_size = {} (--crop keeps the last {})", T,
              c.block_size, c.block_size);
        int changed_id = (ids[T - 1] + V / 2) % V;
        if (!change_to.empty()) {
            const std::vector<int> to = tok.encode(change_to);
            check(to.size() == 1, "--change_to must be one character (got '{}')", change_to);
            check(to[0] != ids[T - 1], "--change_to '{}' is already the prompt's last character", change_to);
            changed_id = to[0];
        }

        matmul.apply_forward(c, 1, T, omp_get_max_threads());
        GPT<float> m;  // with the attention that keeps its probabilities, which this program prints
        gpt_build<float>(m, c, 1, T, nullptr, ActivationPlan{AttentionKind::Materialized});
        if (fresh_init.empty()) ck.read_weights(m);
        else gpt_init(m, seed);

        json j;
        j["source"] = fresh_init.empty() ? fmt::format("checkpoint {}", ckpt)
                                         : fmt::format("init {}, seed {} (config of {})", fresh_init, seed, ckpt);
        j["config"] = {{"vocab_size", V}, {"block_size", c.block_size}, {"n_layer", L}, {"n_head", NH},
                       {"n_embd", c.n_embd}, {"init", to_string(c.init)}};
        j["prompt"] = prompt;
        j["ids"] = ids;
        json tokens = json::array();
        for (int id : ids) tokens.push_back(tok.vocab[id]);
        j["tokens"] = tokens;
        j["vocab"] = tok.vocab;

        gpt_forward(m, ids.data(), nullptr, 1, T);
        json att = json::array();  // (L, NH, T, T)
        for (int l = 0; l < L; l++) {
            json heads = json::array();
            for (int h = 0; h < NH; h++) heads.push_back(matrix_json(m.acts.h[l].att + size_t(h) * T * T, T, T));
            att.push_back(heads);
        }
        j["attention"] = att;
        j["logits"] = matrix_json(m.acts.logits, T, V);
        const std::vector<float> before(m.acts.logits, m.acts.logits + size_t(T) * V);
        // The residual stream of this same forward, before the weights are touched below.
        const std::vector<double> plain = residual_norms(m);

        // Causality: change the last token; only the last row of the logits may move.
        ids[T - 1] = changed_id;
        gpt_forward(m, ids.data(), nullptr, 1, T);
        std::vector<float> delta(size_t(T) * V);  // (T, V)
        for (size_t i = 0; i < delta.size(); i++) delta[i] = std::fabs(m.acts.logits[i] - before[i]);
        j["changed"] = {{"position", T - 1}, {"from", tok.vocab[j["ids"][T - 1].get<int>()]},
                        {"to", tok.vocab[changed_id]}};
        j["delta_logits"] = matrix_json(delta.data(), T, V);

        // The same prompt with both residual projections × 1/√(2L) (the weights are not restored:
        // this is the last use of the model).
        ids[T - 1] = j["ids"][T - 1].get<int>();
        const double factor = 1.0 / std::sqrt(2.0 * L);
        scale_residual_branches(m, factor);
        gpt_forward(m, ids.data(), nullptr, 1, T);
        j["residual_norms"] = {{"plain", plain}, {"scaled", residual_norms(m)}, {"factor", factor}};

        const std::string text = j.dump() + "\n";
        if (out.empty()) {
            fmt::print("{}", text);
        } else {
            std::ofstream f(out, std::ios::binary);
            check(bool(f), "cannot write '{}': {}", out, std::strerror(errno));
            f << text;
            f.close();
            check(bool(f), "cannot write '{}': {}", out, std::strerror(errno));
        }
        return 0;
    });
}

// inspect — print what the course's verification suite asks for, from a config alone:
// the shape after every stage of a forward pass, the parameters per component, and the
// FLOPs per token. `--json` prints the same as one JSON object.
//
//   build/inspect --preset=course
//   build/inspect --preset=gpt2 --json
#include <nlohmann/json.hpp>

#include "apps/flags.h"
#include "lib/count.h"

using namespace hg;

static std::string commas(double x) {  // 816640 -> "816,640"
    std::string s = fmt::format("{:.0f}", x), out;
    for (size_t i = 0; i < s.size(); i++) {
        if (i > 0 && (s.size() - i) % 3 == 0 && s[i - 1] != '-') out += ',';
        out += s[i];
    }
    return out;
}

int main(int argc, char** argv) {
    CLI::App app{"handgrad inspect: shapes, parameter counts and FLOPs of a GPT config"};
    ModelFlags model;
    model.add(app);
    int B = 1, T = 0;
    bool json = false;
    app.add_option("--batch_size", B, "B for the shape table");
    app.add_option("--T", T, "sequence length for the shape table and attention FLOPs (default block_size)");
    app.add_flag("--json", json, "print one JSON object");
    return run_app(app, argc, argv, [&] {
        const GPTConfig c = model.config();
        if (T == 0) T = c.block_size;
        check(B >= 1, "batch_size must be positive (got {})", B);
        check(T >= 1 && T <= c.block_size, "T ({}) must be in [1, block_size = {}]", T, c.block_size);
        const ParameterBreakdown p = count_parameters(c);
        const FlopCount f = count_flops(c, T);
        const auto shapes = shape_table(c, B, T);
        const double total = double(p.total);
        const size_t final_and_head = p.final_layernorm + p.lm_head;

        if (json) {
            nlohmann::ordered_json j;
            j["config"] = {{"preset", model.preset}, {"vocab_size", c.vocab_size}, {"block_size", c.block_size},
                           {"n_layer", c.n_layer}, {"n_head", c.n_head}, {"n_embd", c.n_embd},
                           {"dropout", c.dropout}, {"bias", to_string(c.bias)}, {"tie_weights", c.tie_weights},
                           {"pos_encoding", to_string(c.pos)}, {"gelu", to_string(c.gelu)}, {"init", to_string(c.init)}};
            for (const auto& s : shapes) {
                std::vector<size_t> dims(s.shape.dims.begin(), s.shape.dims.begin() + s.shape.ndim);
                j["shapes"].push_back({{"stage", s.stage}, {"shape", dims}});
            }
            j["parameters"] = {{"embedding", p.embedding}, {"attention", p.attention}, {"mlp", p.mlp},
                               {"block_layernorm", p.block_layernorm}, {"final_layernorm", p.final_layernorm},
                               {"lm_head", p.lm_head}, {"blocks", p.blocks()}, {"total", p.total},
                               {"rule_of_thumb_12LC2", p.rule_of_thumb}};
            j["flops_per_token"] = {{"T", T}, {"forward_weights", f.forward_weights}, {"attention", f.attention},
                                    {"forward", f.forward}, {"training", f.training},
                                    {"training_weights", f.training_weights}, {"crossover_T", f.crossover_T}};
            fmt::print("{}\n", j.dump(2));
            return 0;
        }

        fmt::print("GPT config (preset {}): V={} block_size={} L={} NH={} C={} dropout={} bias={} {} "
                   "positions={} gelu={} init={}\n\n", model.preset, c.vocab_size, c.block_size, c.n_layer,
                   c.n_head, c.n_embd, c.dropout, to_string(c.bias), c.tie_weights ? "tied" : "untied",
                   to_string(c.pos), to_string(c.gelu), to_string(c.init));
        fmt::print("Shapes of one forward pass (B={}, T={})\n", B, T);
        for (const auto& s : shapes) fmt::print("  {:<32} {}\n", s.stage, s.shape.str());

        fmt::print("\nParameters\n");
        auto row = [&](const std::string& name, size_t n) {
            fmt::print("  {:<32} {:>14} {:>7.1f} %\n", name, commas(double(n)), 100.0 * double(n) / total);
        };
        row(c.pos == PosEncoding::Learned ? "embeddings (wte + wpe)" : "embeddings (wte; sinusoidal pos: 0)",
            p.embedding);
        row("attention", p.attention);
        row("MLP", p.mlp);
        row("block LayerNorms", p.block_layernorm);
        row(c.tie_weights ? "final LayerNorm (+ tied unembedding: 0)" : "final LayerNorm + unembedding",
            final_and_head);
        fmt::print("  {:<32} {:>14}\n", "total", commas(total));
        fmt::print("  {:<32} {:>14}   ({:.4f} of the total)\n", "all blocks", commas(double(p.blocks())),
                   double(p.blocks()) / total);
        const double diff = double(p.blocks()) - double(p.rule_of_thumb);
        fmt::print("  12·L·C² rule of thumb {} vs blocks {}: the {} difference is the biases and\n"
                   "  LayerNorm parameters the rule ignores (it counts only the four C×C attention\n"
                   "  matrices and the two C×4C MLP matrices of each block).\n",
                   commas(double(p.rule_of_thumb)), commas(double(p.blocks())), commas(diff));
        fmt::print("  f32 size: {:.5f} MB\n", 4.0 * total / 1e6);

        fmt::print("\nFLOPs per token (a multiply-add = 2 FLOPs; see lib/count.h)\n");
        fmt::print("  {:<44} {:>16}\n", "forward, weights: 2·(blocks + C·V)", commas(f.forward_weights));
        fmt::print("  {:<44} {:>16}   ({:.2f} % of the weights' forward)\n",
                   fmt::format("attention scores + mix at T={}: 4·T·C·L", T), commas(f.attention),
                   100.0 * f.attention / f.forward_weights);
        fmt::print("  {:<44} {:>16}\n", "forward, total", commas(f.forward));
        fmt::print("  {:<44} {:>16}\n", "training, weights: 3 × forward weights", commas(f.training_weights));
        fmt::print("  {:<44} {:>16}\n", "training, total: 3 × forward", commas(f.training));
        fmt::print("  {:<44} {:>16}\n", "crossover T* = 4·C (attention = MLP)", commas(f.crossover_T));
        return 0;
    });
}

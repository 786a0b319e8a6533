// inspect — print what the course's verification suite asks for, from a config alone:
// the shape after every stage of a forward pass, the parameters per component (also as
// Lesson 14's table), the FLOPs per token, the Chinchilla compute budget, and the memory of a
// training step under each --attention and --recompute (the memory check's own count, by which
// build/train refuses a run). `--json` prints the same as one JSON object. With a model (freshly
// initialised, or --ckpt):
//   --residual_norms  ‖H⁽ˡ⁾‖ along depth, as initialised and with the residual branches
//                     scaled by 1/√(2L) (Lesson 14's Systems lens)
//   --causality       change the last token: which rows of the logits move
//   --circuits        per head, the numerical rank of the QK and OV circuits (≤ C/NH)
//
//   build/inspect --preset=course
//   build/inspect --preset=gpt2 --json
//   build/inspect --preset=lesson14 --residual_norms --causality
//   build/inspect --ckpt=out-shakespeare-char/ckpt.safetensors --circuits
#include <nlohmann/json.hpp>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <optional>

#include "apps/flags.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/model/count.h"
#include "lib/model/memory_check.h"
#include "lib/model/probe.h"
#include "lib/train/train_config.h"

using namespace hg;

static std::string commas(double x) {  // 816640 -> "816,640"
    std::string s = fmt::format("{:.0f}", x), out;
    for (size_t i = 0; i < s.size(); i++) {
        if (i > 0 && (s.size() - i) % 3 == 0 && s[i - 1] != '-') out += ',';
        out += s[i];
    }
    return out;
}

// The memory check's count (lib/model/memory_check.h) of a training step at (B, T) on one model
// replica, under each attention and recompute setting, in float32 and bfloat16: one row each.
struct MemoryRow {
    ActivationPlan plan;
    std::optional<MemoryNeed> f32, bf16;  // nothing: beyond any machine (memory_need refused it)
};
static std::vector<MemoryRow> memory_rows(const GPTConfig& c, int B, int T) {
    std::vector<MemoryRow> rows;
    for (AttentionKind a : {AttentionKind::Flash, AttentionKind::Materialized})
        for (Recompute r : {Recompute::None, Recompute::Attention, Recompute::Block}) {
            MemoryRow row{training_plan(a, r), std::nullopt, std::nullopt};
            try {
                row.f32 = memory_need(c, B, T, 1, 3, false, row.plan);
                row.bf16 = memory_need(c, B, T, 1, 3, true, row.plan);
            } catch (const Error&) {
            }
            rows.push_back(row);
        }
    return rows;
}

static std::string gib(const std::optional<MemoryNeed>& need) {
    return need ? fmt::format("{:.2f} GiB", need->activation_bytes / double(1 << 30)) : "beyond any machine";
}

// The lesson's toy sequence (ids = [7, 13, 7, 21, 13, 5, 9, 7]), repeated to T, modulo V.
static std::vector<int> lesson_ids(int T, int V) {
    const int ids[8] = {7, 13, 7, 21, 13, 5, 9, 7};
    std::vector<int> out(T);
    for (int t = 0; t < T; t++) out[t] = ids[t % 8] % V;
    return out;
}

// ‖H⁽ˡ⁾‖ for l = 0..L as loaded, then for the same weights with attn.c_proj and mlp.c_proj
// scaled by 1/√(2L).
static void print_residual_norms(GPT<float>& m, int T, const std::string& source) {
    const GPTConfig& c = m.config;
    const std::vector<int> ids = lesson_ids(T, c.vocab_size);
    gpt_forward(m, ids.data(), nullptr, 1, T);
    const std::vector<double> plain = residual_norms(m);
    std::vector<float> saved(m.params_memory.data(), m.params_memory.data() + m.num_parameters);
    scale_residual_branches(m, 1.0 / std::sqrt(2.0 * c.n_layer));
    gpt_forward(m, ids.data(), nullptr, 1, T);
    const std::vector<double> scaled = residual_norms(m);
    std::memcpy(m.params_memory.data(), saved.data(), saved.size() * sizeof(float));

    fmt::print("Residual-stream norm |H(l)| along depth, l = 0..{} (B=1, T={}, {})\n", c.n_layer, T, source);
    fmt::print("  sqrt(T·C), the norm of a ({} × {}) matrix of unit-variance entries: {:.4f}\n", T, c.n_embd,
               std::sqrt(double(T) * c.n_embd));
    auto line = [&](const char* label, const std::vector<double>& n) {
        std::string row;
        for (double x : n) row += fmt::format(" {:9.4f}", x);
        fmt::print("  {:<34}{}   |H(L)|/|H(0)| = {:.4f}\n", label, row, n.back() / n.front());
    };
    line(source.rfind("checkpoint", 0) == 0 ? "as loaded" : "as initialised", plain);
    line("residual branches × 1/√(2L)", scaled);
}

// The lesson's causality picture: change the last token, compare the logits row by row.
static void print_causality(GPT<float>& m, int T, const std::string& source) {
    const size_t V = m.config.vocab_size;
    std::vector<int> ids = lesson_ids(T, int(V));
    gpt_forward(m, ids.data(), nullptr, 1, T);
    std::vector<float> before(m.acts.logits, m.acts.logits + T * V);
    const int changed = 42 % int(V);  // the lesson changes ids(8) from 7 to 42
    ids[T - 1] = changed != ids[T - 1] ? changed : (changed + 1) % int(V);
    gpt_forward(m, ids.data(), nullptr, 1, T);
    fmt::print("Causality: change the last token (position {}) and compare the logits ({})\n", T, source);
    int identical = 0;  // rows before the first that changed, all bit-identical
    for (int t = 0; t < T; t++) {
        double dmax = 0;
        for (size_t v = 0; v < V; v++)
            dmax = std::max(dmax, std::fabs(double(m.acts.logits[t * V + v]) - before[t * V + v]));
        const bool same = std::memcmp(&before[t * V], m.acts.logits + t * V, V * sizeof(float)) == 0;
        if (same && identical == t) identical++;
        if (T <= 16 || !same || t == T - 1)  // a long context: one line for the identical prefix
            fmt::print("  position {:>3}: max |dZ| = {:<12.6g} {}\n", t + 1, dmax, same ? "bit-identical" : "changed");
        else if (t == 0)
            fmt::print("  positions 1-{}: see the count below\n", T - 1);
    }
    fmt::print("  {} of the {} earlier positions bit-identical\n", identical, T - 1);
}

static void print_circuits(const GPT<float>& m, const std::string& source) {
    const GPTConfig& c = m.config;
    const int hs = c.n_embd / c.n_head;
    fmt::print("QK (W_Q W_Kᵀ) and OV (W_V W_O) circuits per head, each ({} × {}), {}\n", c.n_embd, c.n_embd, source);
    fmt::print("  rank ≤ C/NH = {}; numerical rank = #σ > 1e-10·σ1 (one-sided Jacobi SVD in double)\n", hs);
    fmt::print("  {:>5} {:>4}   {:>7} {:>10} {:>10}   {:>7} {:>10} {:>10}\n", "layer", "head", "rank QK",
               fmt::format("σ{}/σ1", hs), fmt::format("σ{}/σ1", hs + 1), "rank OV", fmt::format("σ{}/σ1", hs),
               fmt::format("σ{}/σ1", hs + 1));
    for (int l = 0; l < c.n_layer; l++)
        for (int h = 0; h < c.n_head; h++) {
            const HeadCircuits hc = head_circuits(m, l, h);
            const std::vector<double> sq = singular_values(hc.qk), so = singular_values(hc.ov);
            auto ratio = [&](const std::vector<double>& s, int i) { return i < int(s.size()) ? s[i] / s[0] : 0.0; };
            fmt::print("  {:>5} {:>4}   {:>7} {:>10.3e} {:>10.3e}   {:>7} {:>10.3e} {:>10.3e}\n", l, h,
                       numerical_rank(sq), ratio(sq, hs - 1), ratio(sq, hs), numerical_rank(so), ratio(so, hs - 1),
                       ratio(so, hs));
        }
}

int main(int argc, char** argv) {
    CLI::App app{"handgrad inspect: shapes, parameter counts and FLOPs of a GPT config"};
    ModelFlags model;
    model.add(app);
    int B = 1, T = 0;
    bool json = false, norms = false, causality = false, circuits = false;
    std::string ckpt;
    uint64_t seed = 14;  // the lesson's seed(14); our generator draws differently
    app.add_option("--batch_size", B, "B for the shape table");
    app.add_option("--T", T, "sequence length for the shape table and attention FLOPs (default block_size)");
    app.add_flag("--json", json, "print one JSON object");
    app.add_option("--ckpt", ckpt, "inspect this checkpoint's model (its config replaces the model flags)");
    app.add_option("--seed", seed, "init seed for --residual_norms, --causality, --circuits without --ckpt");
    app.add_flag("--residual_norms", norms, "residual-stream norm along depth, plain and 1/sqrt(2L)-scaled");
    app.add_flag("--causality", causality, "change the last token and compare the logits row by row");
    app.add_flag("--circuits", circuits, "numerical rank of each head's QK and OV circuits");
    MatmulFlag matmul;  // for the reports that run the model
    matmul.add(app);
    return run_app(app, argc, argv, [&] {
        matmul.validate();
        std::optional<Checkpoint> ck;  // no default constructor: a Checkpoint is a loaded file
        if (!ckpt.empty()) ck.emplace(Checkpoint::load(ckpt));
        const GPTConfig c = ck ? ck->config : model.config();
        if (norms || causality || circuits) {
            check(!json,
                  "--json prints the config's tables only; drop it for --residual_norms, --causality, --circuits");
            if (T == 0) T = c.block_size;
            check(T >= 1 && T <= c.block_size, "T ({}) must be in [1, block_size = {}]", T, c.block_size);
            check_memory_available(memory_need(c, 1, T, 1, 1));
            GPT<float> m;
            gpt_build(m, c, 1, T);
            if (ck) ck->read_weights(m);
            else gpt_init(m, seed);
            matmul.apply_forward(c, 1, T, omp_get_max_threads());
            const std::string source = ckpt.empty() ? fmt::format("init {}, seed {}", to_string(c.init), seed)
                                                     : fmt::format("checkpoint {}", ckpt);
            const char* sep = "";  // a blank line between two reports
            if (norms) {
                print_residual_norms(m, T, source);
                sep = "\n";
            }
            if (causality) {
                fmt::print("{}", sep);
                print_causality(m, T, source);
                sep = "\n";
            }
            if (circuits) {
                fmt::print("{}", sep);
                print_circuits(m, source);
            }
            return 0;
        }
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
                           {"pos_encoding", to_string(c.pos)}, {"gelu", to_string(c.gelu)}, {"init", to_string(c.init)},
                           {"norm", to_string(c.norm)}, {"mlp", to_string(c.mlp)}, {"mlp_hidden", c.mlp_hidden()},
                           {"rope_base", c.rope_base}, {"qk_norm", c.qk_norm}, {"logit_softcap", c.logit_softcap},
                           {"init_zero_proj", c.init_zero_proj}};
            for (const auto& s : shapes) {
                std::vector<size_t> dims(s.shape.dims.begin(), s.shape.dims.begin() + s.shape.ndim);
                j["shapes"].push_back({{"stage", s.stage}, {"shape", dims}});
            }
            j["parameters"] = {{"embedding", p.embedding}, {"attention", p.attention}, {"mlp", p.mlp},
                               {"block_layernorm", p.block_layernorm}, {"final_layernorm", p.final_layernorm},
                               {"lm_head", p.lm_head}, {"blocks", p.blocks()}, {"total", p.total},
                               {"rule_of_thumb_12LC2", p.rule_of_thumb}};
            const ComputeBudget budget = chinchilla_budget(p.total);
            j["lesson14_table"] = lesson14_parameter_table(c);
            j["lesson14"] = {{"token_embedding", p.token_embedding}, {"position_embedding", p.position_embedding},
                             {"per_block", p.blocks() / size_t(c.n_layer)}, {"attention_biases", p.attention_biases},
                             {"total_without_attention_biases", count_parameters(lesson14_convention(c)).total},
                             {"f32_megabytes", 4.0 * total / 1e6},
                             {"token_embedding_share", double(p.token_embedding) / total},
                             {"blocks_share", double(p.blocks()) / total}};
            j["compute_budget"] = {{"parameters", budget.parameters}, {"tokens", budget.tokens},
                                   {"flops", budget.flops}};
            j["flops_per_token"] = {{"T", T}, {"forward_weights", f.forward_weights}, {"attention", f.attention},
                                    {"forward", f.forward}, {"training", f.training},
                                    {"training_weights", f.training_weights}, {"crossover_T", f.crossover_T}};
            for (const MemoryRow& r : memory_rows(c, B, T)) {
                nlohmann::ordered_json row = {{"attention", to_string(r.plan.attention)},
                                              {"recompute", to_string(r.plan.recompute)}, {"B", B}, {"T", T}};
                if (r.f32) row["float32"] = {{"activation_bytes", r.f32->activation_bytes},
                                             {"state_bytes", r.f32->state_bytes}};
                if (r.bf16) row["bfloat16"] = {{"activation_bytes", r.bf16->activation_bytes},
                                               {"state_bytes", r.bf16->state_bytes}};
                j["training_memory"].push_back(row);
            }
            fmt::print("{}\n", j.dump(2));
            return 0;
        }

        fmt::print("GPT config (preset {}): V={} block_size={} L={} NH={} C={} dropout={} bias={} {} "
                   "positions={} gelu={} init={}\n\n", model.preset, c.vocab_size, c.block_size, c.n_layer,
                   c.n_head, c.n_embd, c.dropout, to_string(c.bias), c.tie_weights ? "tied" : "untied",
                   to_string(c.pos), to_string(c.gelu), to_string(c.init));
        const GPTConfig gpt2_block{};
        if (c.norm != gpt2_block.norm || c.mlp != gpt2_block.mlp || c.pos == PosEncoding::Rope || c.qk_norm ||
            c.logit_softcap > 0 || c.init_zero_proj)
            fmt::print("Block: {} (MLP hidden width {})\n\n", describe_block(c), c.mlp_hidden());
        fmt::print("Shapes of one forward pass (B={}, T={})\n", B, T);
        for (const auto& s : shapes) fmt::print("  {:<32} {}\n", s.stage, s.shape.str());

        fmt::print("\nParameters\n");
        auto row = [&](const std::string& name, size_t n) {
            fmt::print("  {:<32} {:>14} {:>7.1f} %\n", name, commas(double(n)), 100.0 * double(n) / total);
        };
        row(c.pos == PosEncoding::Learned      ? "embeddings (wte + wpe)"
            : c.pos == PosEncoding::Sinusoidal ? "embeddings (wte; sinusoidal pos: 0)"
                                               : "embeddings (wte; rope: no wpe)",
            p.embedding);
        row("attention", p.attention);
        row(c.mlp == MlpKind::SwiGLU ? "MLP (SwiGLU: W1, W3 stacked; W2)" : "MLP", p.mlp);
        row(c.norm == NormKind::RMSNorm ? "block RMSNorms (gains)" : "block LayerNorms", p.block_layernorm);
        const std::string final_norm = c.norm == NormKind::RMSNorm ? "final RMSNorm" : "final LayerNorm";
        row(c.tie_weights ? final_norm + " (+ tied unembedding: 0)" : final_norm + " + unembedding", final_and_head);
        fmt::print("  {:<32} {:>14}\n", "total", commas(total));
        fmt::print("  {:<32} {:>14}   ({:.4f} of the total)\n", "all blocks", commas(double(p.blocks())),
                   double(p.blocks()) / total);
        const double diff = double(p.blocks()) - double(p.rule_of_thumb);
        if (c.mlp == MlpKind::SwiGLU)
            fmt::print("  L·(4C² + 3·C·H) rule, H = {}: {} vs blocks {}: the {} difference is the biases and\n"
                       "  norm parameters the rule ignores (it counts only the four C×C attention matrices\n"
                       "  and SwiGLU's three C×H matrices of each block).\n",
                       c.mlp_hidden(), commas(double(p.rule_of_thumb)), commas(double(p.blocks())), commas(diff));
        else
            fmt::print("  12·L·C² rule of thumb {} vs blocks {}: the {} difference is the biases and\n"
                       "  LayerNorm parameters the rule ignores (it counts only the four C×C attention\n"
                       "  matrices and the two C×4C MLP matrices of each block).\n",
                       commas(double(p.rule_of_thumb)), commas(double(p.blocks())), commas(diff));
        fmt::print("  f32 size: {:.5f} MB\n", 4.0 * total / 1e6);

        fmt::print("\nParameters as Lesson 14 tabulates them\n");
        for (const std::string& line : lesson14_parameter_table(c)) fmt::print("{}\n", line);
        fmt::print("token embedding share {:.4f}, blocks share {:.4f}\n", double(p.token_embedding) / total,
                   double(p.blocks()) / total);
        const ParameterBreakdown lesson = count_parameters(lesson14_convention(c));
        if (p.attention_biases > 0)
            fmt::print("Lesson 14 omits attention biases: without them {} (token embedding share {:.4f}, blocks\n"
                       "share {:.4f}); the {} difference is the attention biases, {} per block.\n",
                       commas(double(lesson.total)), double(lesson.token_embedding) / double(lesson.total),
                       double(lesson.blocks()) / double(lesson.total), commas(double(p.attention_biases)),
                       commas(double(p.attention_biases / size_t(c.n_layer))));

        fmt::print("\nFLOPs per token (a multiply-add = 2 FLOPs; see lib/model/count.h)\n");
        fmt::print("  {:<44} {:>16}\n", "forward, weights: 2·(blocks + C·V)", commas(f.forward_weights));
        fmt::print("  {:<44} {:>16}   ({:.2f} % of the weights' forward)\n",
                   fmt::format("attention scores + mix at T={}: 4·T·C·L", T), commas(f.attention),
                   100.0 * f.attention / f.forward_weights);
        fmt::print("  {:<44} {:>16}\n", "forward, total", commas(f.forward));
        fmt::print("  {:<44} {:>16}\n", "training, weights: 3 × forward weights", commas(f.training_weights));
        fmt::print("  {:<44} {:>16}\n", "training, total: 3 × forward", commas(f.training));
        fmt::print("  {:<44} {:>16}\n", "crossover T* = 4·C (attention = MLP)", commas(f.crossover_T));
        if (p.attention_biases > 0) {
            const FlopCount fl = count_flops(lesson14_convention(c), T);
            fmt::print("  without attention biases (Lesson 14's count): forward, weights {}; training, weights {}\n"
                       "  ({:.2f} % attention)\n", commas(fl.forward_weights), commas(fl.training_weights),
                       100.0 * fl.attention / fl.forward_weights);
        }

        const ComputeBudget budget = chinchilla_budget(p.total);
        fmt::print("\nCompute budget (Chinchilla: D ≈ 20 tokens per parameter, C ≈ 6·P·D FLOPs)\n");
        fmt::print("  P = {}   D ≈ {} tokens   C ≈ {:.2e} FLOPs\n", commas(budget.parameters), commas(budget.tokens),
                   budget.flops);
        if (p.attention_biases > 0) {
            const ComputeBudget bl = chinchilla_budget(lesson.total);
            fmt::print("  without attention biases: P = {}   D ≈ {} tokens   C ≈ {:.2e} FLOPs\n",
                       commas(bl.parameters), commas(bl.tokens), bl.flops);
        }

        const std::vector<MemoryRow> rows = memory_rows(c, B, T);
        fmt::print("\nMemory of a training step at B={}, T={}, as build/train's memory check counts it\n", B, T);
        if (rows.front().f32)
            fmt::print("  weights, gradients, AdamW's two moments: {:.2f} GiB (bf16: {:.2f} GiB)\n",
                       rows.front().f32->state_bytes / double(1 << 30),
                       rows.front().bf16->state_bytes / double(1 << 30));
        fmt::print("  activations and backward scratch:\n  {:<14} {:<11} {:>18} {:>18}\n", "--attention", "--recompute",
                   "float32", "bfloat16");
        for (const MemoryRow& r : rows)
            fmt::print("  {:<14} {:<11} {:>18} {:>18}\n", to_string(r.plan.attention), to_string(r.plan.recompute),
                       gib(r.f32), gib(r.bf16));
        return 0;
    });
}

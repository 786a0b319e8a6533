// Every number the course texts print, reproduced by handgrad: Lesson 14's toy GPT
// and its GPT-2 reconstructions, Step 5's course model, the Chinchilla budget, and the
// behaviour the lesson shows (causality, residual-stream growth along depth, with and without
// the 1/√(2N) branch scaling), plus Step 5's "going further": each head's QK and OV circuits
// have rank ≤ d/H, checked on a briefly trained course model.
//
// Counting convention: Lesson 14 omits attention biases (its GPT-2 numbers are
// lesson14_convention(preset("gpt2"))); its FLOPs are 2 × (block parameters + C·V) per token
// forward, 3 × that for training, and 4·T·C·L for attention scores + mix (lib/model/count.h).
#include "tests/catch.h"

#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include <fmt/format.h>

#include "lib/data/dataset.h"
#include "lib/model/count.h"
#include "lib/model/gpt.h"
#include "lib/model/probe.h"
#include "lib/text/char_tokenizer.h"
#include "lib/text/text_file.h"
#include "lib/train/trainer.h"

using namespace hg;

// Runs build/inspect (HANDGRAD_BIN) with args; returns stdout + stderr.
static std::string run_inspect(const std::string& args, int& status) {
    const char* dir = std::getenv("HANDGRAD_BIN");
    const std::string cmd = std::string(dir ? dir : "build") + "/inspect " + args + " 2>&1";
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    const int st = pclose(p);
    status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return out;
}

static bool has_line(const std::string& text, const std::string& line) {
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);)
        if (l == line) return true;
    return false;
}

// ---------------------------------------------------------------------------------------------
// Counts.

TEST_CASE("Lesson 14 toy: parameter table, size and blocks share", "[numbers][count]") {
    const GPTConfig c = preset("lesson14");
    CHECK(c.vocab_size == 50);
    CHECK(c.block_size == 8);
    CHECK(c.n_embd == 64);
    CHECK(c.n_head == 4);
    CHECK(c.n_layer == 4);
    const ParameterBreakdown p = count_parameters(c);
    CHECK(p.token_embedding == 3200);
    CHECK(p.position_embedding == 0);
    CHECK(p.blocks() / 4 == 49728);
    CHECK(p.blocks() == 198912);
    CHECK(p.final_layernorm == 128);
    CHECK(p.lm_head == 3200);
    CHECK(p.total == 205440);
    CHECK(p.attention_biases == 0);
    CHECK(double(p.total) * 4 / 1e6 == Approx(0.82176).epsilon(1e-12));
    CHECK(double(p.blocks()) / double(p.total) == Approx(0.9682242990654205).epsilon(1e-12));

    // The lesson's table, byte for byte as the lesson prints it.
    const std::vector<std::string> expected = {
        "Component                | Params",
        "-------------------------+--------",
        "Token embedding           3200",
        "Positional (sinusoidal)   0",
        "Per-block (× 4 )           49728",
        "All blocks                198912",
        "Final LN                  128",
        "LM head                   3200",
        "-------------------------+--------",
        "TOTAL                     205440",
        "f32 size (MB):            0.82176",
    };
    CHECK(lesson14_parameter_table(c) == expected);
}

TEST_CASE("Lesson 14 toy: FLOPs per token under the lesson's convention", "[numbers][flops]") {
    const GPTConfig c = preset("lesson14");
    const FlopCount f = count_flops(c, 8);
    CHECK(f.forward_weights == 404224);
    CHECK(f.training_weights == 1212672);
    CHECK(f.attention == 8192);
    CHECK(100 * f.attention / f.forward_weights == Approx(2.026599113362888).epsilon(1e-12));
    CHECK(fmt::format("{:.2f}", 100 * f.attention / f.forward_weights) == "2.03");
    CHECK(f.crossover_T == 256);
    CHECK(2 * count_parameters(c).total == 410880);  // the lesson's "(2 × n_total = 410880)"
}

TEST_CASE("GPT-2 small and medium, with and without attention biases", "[numbers][count]") {
    SECTION("GPT-2 small: 124,439,808 with, 124,402,944 without; the gap is 12 × 4 × 768") {
        const GPTConfig c = preset("gpt2");
        const ParameterBreakdown with = count_parameters(c);
        const ParameterBreakdown without = count_parameters(lesson14_convention(c));
        CHECK(with.total == 124439808);
        CHECK(without.total == 124402944);
        CHECK(with.total - without.total == 36864);
        CHECK(with.attention_biases == 12 * 4 * 768);
        CHECK(without.attention_biases == 0);
        // The lesson's shares are of the no-attention-bias total.
        CHECK(double(without.token_embedding) / double(without.total) == Approx(0.3102609533099152).epsilon(1e-12));
        CHECK(double(without.blocks()) / double(without.total) == Approx(0.6834050486779477).epsilon(1e-12));
        CHECK(fmt::format("{:.4f} {:.4f}", double(without.token_embedding) / double(without.total),
                          double(without.blocks()) / double(without.total)) == "0.3103 0.6834");
    }
    SECTION("GPT-2 small FLOPs (lesson's count): 247,229,952 forward, 741,689,856 training") {
        const FlopCount f = count_flops(lesson14_convention(preset("gpt2")), 1024);
        CHECK(f.forward_weights == 247229952);
        CHECK(f.training_weights == 741689856);
        CHECK(f.attention == 37748736);
        CHECK(100 * f.attention / f.forward_weights == Approx(15.268674242188906).epsilon(1e-12));
        CHECK(fmt::format("{:.2f}", 100 * f.attention / f.forward_weights) == "15.27");
        CHECK(f.crossover_T == 3072);
    }
    SECTION("GPT-2 medium: 354,823,168 with, 354,724,864 without; the gap is 24 × 4 × 1024") {
        const GPTConfig c = preset("gpt2-medium");
        CHECK(count_parameters(c).total == 354823168);
        CHECK(count_parameters(lesson14_convention(c)).total == 354724864);
        CHECK(count_parameters(c).attention_biases == 98304);
        CHECK(98304 == 24 * 4 * 1024);
    }
}

TEST_CASE("Step 5 course model: 816,640 and its shares", "[numbers][count]") {
    const ParameterBreakdown p = count_parameters(preset("course"));
    const double total = double(p.total);
    CHECK(p.total == 816640);
    CHECK(fmt::format("{:.1f} {:.1f} {:.1f}", 100 * p.embedding / total, 100 * p.attention / total,
                      100 * p.mlp / total) == "2.0 32.2 64.5");
    CHECK(p.rule_of_thumb == 786432);
    CHECK(p.blocks() == 791552);
}

TEST_CASE("Chinchilla budget: D = 20 P tokens, C = 6 P D FLOPs", "[numbers][budget]") {
    const ComputeBudget toy = chinchilla_budget(count_parameters(preset("lesson14")).total);
    CHECK(toy.parameters == 205440);
    CHECK(toy.tokens == 4108800);
    CHECK(fmt::format("{:.2e}", toy.flops) == "5.06e+12");
    const ComputeBudget gpt2 = chinchilla_budget(count_parameters(lesson14_convention(preset("gpt2"))).total);
    CHECK(gpt2.parameters == 124402944);
    CHECK(gpt2.tokens == 2488058880.0);
    CHECK(fmt::format("{:.2e}", gpt2.flops) == "1.86e+18");
    // 3.125 bits of data per bit of f32 parameter budget, at 5 bits per token.
    CHECK(5 * gpt2.tokens / (32 * gpt2.parameters) == Approx(3.125));
}

// ---------------------------------------------------------------------------------------------
// The lesson's init and what it does.

static double stddev(const float* w, size_t n) {
    double s = 0, s2 = 0;
    for (size_t i = 0; i < n; i++) s += w[i], s2 += double(w[i]) * w[i];
    const double mean = s / n;
    return std::sqrt(s2 / n - mean * mean);
}

TEST_CASE("lesson14 init: each matrix for its fan-in; lesson14-scaled is the same draw, scaled",
          "[numbers][init]") {
    GPTConfig c = preset("lesson14");
    CHECK(c.init == InitScheme::Lesson14);
    CHECK(parse_init("lesson14") == InitScheme::Lesson14);
    CHECK(parse_init(to_string(InitScheme::Lesson14Scaled)) == InitScheme::Lesson14Scaled);
    GPT<float> m;
    gpt_build(m, c, 1, 8);
    gpt_init(m, 14);
    const double C = c.n_embd;
    for (const TensorSpec& t : m.table) {
        const float* w = m.params_memory.data() + t.offset;
        const size_t n = t.shape.numel();
        INFO(t.name);
        if (t.shape.ndim == 1) {  // biases 0, LayerNorm γ 1
            const float want = t.name.find("ln_") != std::string::npos && t.name.find(".weight") != std::string::npos;
            for (size_t i = 0; i < n; i++) REQUIRE(w[i] == want);
            continue;
        }
        double want = 1 / std::sqrt(C);                                   // Q, K, V, W_O, LM head
        if (t.name == "transformer.wte.weight") want = 0.1;
        if (t.name.find("mlp.c_fc.weight") != std::string::npos) want = std::sqrt(2 / C);         // He
        if (t.name.find("mlp.c_proj.weight") != std::string::npos) want = std::sqrt(2 / (4 * C));  // He
        // n ≥ 3,200 draws: the sample std is within ~2.5 % of σ at 2 standard errors.
        CHECK(stddev(w, n) == Approx(want).epsilon(0.05));
    }

    GPTConfig cs = c;
    cs.init = InitScheme::Lesson14Scaled;
    GPT<float> s;
    gpt_build(s, cs, 1, 8);
    gpt_init(s, 14);
    const double k = 1 / std::sqrt(2.0 * c.n_layer);
    for (const TensorSpec& t : m.table) {
        const float* a = m.params_memory.data() + t.offset;
        const float* b = s.params_memory.data() + t.offset;
        const bool scaled = t.name.find("c_proj.weight") != std::string::npos;
        INFO(t.name);
        if (!scaled) {
            CHECK(std::memcmp(a, b, t.shape.numel() * sizeof(float)) == 0);
            continue;
        }
        for (size_t i = 0; i < t.shape.numel(); i++) REQUIRE(b[i] == Approx(a[i] * k).epsilon(1e-6).margin(1e-12));
    }
}

// The lesson's ids = [7, 13, 7, 21, 13, 5, 9, 7] (its 1-based ids are valid 0-based ids too).
static const std::vector<int> kLessonIds = {7, 13, 7, 21, 13, 5, 9, 7};

TEST_CASE("lesson14 causality: changing the last id changes only the last row of the logits",
          "[numbers][causal]") {
    const GPTConfig c = preset("lesson14");
    const int T = 8;
    const size_t V = c.vocab_size;
    GPT<float> m;
    gpt_build(m, c, 1, T);
    gpt_init(m, 14);
    std::vector<int> ids = kLessonIds;
    gpt_forward(m, ids.data(), nullptr, 1, T);
    const std::vector<float> before(m.acts.logits, m.acts.logits + T * V);

    ids[T - 1] = 42;  // the lesson's ids_b(8) = 42
    gpt_forward(m, ids.data(), nullptr, 1, T);
    for (int t = 0; t < T; t++) {
        INFO("row " << t + 1);
        const bool same = std::memcmp(&before[t * V], m.acts.logits + t * V, V * sizeof(float)) == 0;
        CHECK(same == (t < T - 1));
    }
    double dmax = 0;
    for (size_t v = 0; v < V; v++)
        dmax = std::max(dmax, std::fabs(double(m.acts.logits[(T - 1) * V + v]) - before[(T - 1) * V + v]));
    CHECK(dmax > 0.01);  // a visible change, like the lesson's 0.52

    // Exercise 4, from the other end: changing ids(1) moves every row.
    ids = kLessonIds;
    ids[0] = 42;
    gpt_forward(m, ids.data(), nullptr, 1, T);
    for (int t = 0; t < T; t++) {
        INFO("row " << t + 1 << " after changing ids(1)");
        CHECK(std::memcmp(&before[t * V], m.acts.logits + t * V, V * sizeof(float)) != 0);
    }
}

// ‖H⁽ˡ⁾‖, l = 0..L, for the lesson's ids with the given init.
static std::vector<double> lesson_norms(InitScheme init, uint64_t seed) {
    GPTConfig c = preset("lesson14");
    c.init = init;
    GPT<float> m;
    gpt_build(m, c, 1, 8);
    gpt_init(m, seed);
    gpt_forward(m, kLessonIds.data(), nullptr, 1, 8);
    return residual_norms(m);
}

TEST_CASE("lesson14 residual stream grows along depth, less with 1/sqrt(2N) branch scaling",
          "[numbers][residual]") {
    for (uint64_t seed : {14, 1, 2, 3, 4}) {
        const std::vector<double> plain = lesson_norms(InitScheme::Lesson14, seed);
        const std::vector<double> scaled = lesson_norms(InitScheme::Lesson14Scaled, seed);
        const double g_plain = plain.back() / plain.front(), g_scaled = scaled.back() / scaled.front();
        INFO("seed " << seed << ": growth " << g_plain << " as initialised, " << g_scaled << " scaled");
        REQUIRE(plain.size() == 5);
        // H⁽⁰⁾ = 0.1·N(0,1) embeddings + the sinusoidal table: √(8·32 + 512·0.01) ≈ 16.16.
        CHECK(plain[0] == Approx(16.16).epsilon(0.03));
        CHECK(scaled[0] == plain[0]);  // the same draw: only the branches differ
        for (int l = 1; l <= 4; l++) CHECK(plain[l] > plain[l - 1]);
        CHECK(g_plain > 2.5);            // the lesson: 4.3×
        CHECK(g_scaled < 0.7 * g_plain); // the lesson: 1.8×
        CHECK(g_scaled > 1.0);
    }
    // lesson14-scaled equals scaling the branches of lesson14's weights after the fact.
    GPTConfig c = preset("lesson14");
    GPT<float> m;
    gpt_build(m, c, 1, 8);
    gpt_init(m, 14);
    scale_residual_branches(m, 1 / std::sqrt(8.0));
    gpt_forward(m, kLessonIds.data(), nullptr, 1, 8);
    const std::vector<double> post = residual_norms(m), scaled = lesson_norms(InitScheme::Lesson14Scaled, 14);
    for (size_t l = 0; l < post.size(); l++) CHECK(post[l] == Approx(scaled[l]).epsilon(1e-5));
}

// ---------------------------------------------------------------------------------------------
// Singular values and the QK / OV circuits.

static Matrix random_matrix(int rows, int cols, Rng& rng) {
    Matrix a{rows, cols, std::vector<double>(size_t(rows) * cols)};
    for (double& x : a.a) x = rng.normal();
    return a;
}

static Matrix matmul(const Matrix& x, const Matrix& y) {
    Matrix z{x.rows, y.cols, std::vector<double>(size_t(x.rows) * y.cols)};
    for (int i = 0; i < x.rows; i++)
        for (int k = 0; k < x.cols; k++)
            for (int j = 0; j < y.cols; j++) z.at(i, j) += x.at(i, k) * y.at(k, j);
    return z;
}

TEST_CASE("singular_values: known values, Frobenius norm, numerical rank of products", "[numbers][svd]") {
    SECTION("[[3, 0], [4, 5]] has σ = √45, √5") {
        const std::vector<double> s = singular_values(Matrix{2, 2, {3, 0, 4, 5}});
        REQUIRE(s.size() == 2);
        CHECK(s[0] == Approx(std::sqrt(45.0)).epsilon(1e-14));
        CHECK(s[1] == Approx(std::sqrt(5.0)).epsilon(1e-14));
    }
    SECTION("a rotated diagonal keeps its diagonal as singular values") {
        const int n = 7;
        Matrix a{n, n, std::vector<double>(n * n, 0.0)};
        for (int i = 0; i < n; i++) a.at(i, i) = i + 1;
        for (int p = 0; p + 1 < n; p++) {  // a Givens rotation of rows (p, p+1) by 0.3 + p
            const double cs = std::cos(0.3 + p), sn = std::sin(0.3 + p);
            for (int j = 0; j < n; j++) {
                const double x = a.at(p, j), y = a.at(p + 1, j);
                a.at(p, j) = cs * x - sn * y, a.at(p + 1, j) = sn * x + cs * y;
            }
        }
        const std::vector<double> s = singular_values(a);
        for (int i = 0; i < n; i++) CHECK(s[i] == Approx(n - i).epsilon(1e-13));
    }
    SECTION("random products X (n×k) · Y (k×m) have numerical rank k; Σσ² = ‖A‖²") {
        Rng rng(5);
        for (int k : {1, 5, 16, 40}) {
            const Matrix a = matmul(random_matrix(33, k, rng), random_matrix(k, 40, rng));  // wide: (33, 40)
            const std::vector<double> s = singular_values(a);
            double f2 = 0, s2 = 0;
            for (double x : a.a) f2 += x * x;
            for (double x : s) s2 += x * x;
            INFO("k = " << k);
            CHECK(s.size() == 33);
            CHECK(s2 == Approx(f2).epsilon(1e-12));
            CHECK(numerical_rank(s) == std::min(k, 33));
        }
        CHECK(numerical_rank(singular_values(Matrix{3, 3, std::vector<double>(9, 0.0)})) == 0);
    }
}

static std::string tiny_shakespeare() {
    const char* p = std::getenv("HANDGRAD_DATA");
    if (!p || !*p) {
        WARN("HANDGRAD_DATA is not set: skipping the trained-model circuit checks");
        return "";
    }
    return p;
}

TEST_CASE("QK and OV circuits of a briefly trained course model have rank d/H = 32",
          "[numbers][circuits]") {
    const std::string path = tiny_shakespeare();
    if (path.empty()) return;
    const std::string text = read_text_file(path);
    const Tokenizer tok = Tokenizer::from_text(text);
    const std::vector<int> ids = tok.encode(text);
    const Split split = split_train_val(ids);
    const GPTConfig c = preset("course");
    TrainConfig tc;
    tc.batch_size = 8, tc.max_iters = 30;
    tc.schedule = LrSchedule{1e-3, 1e-4, 5, 30, true};
    Trainer tr;
    tr.start(c, tc, tok.vocab, split.train, split.val);
    double first = 0, last = 0;
    for (int i = 0; i < 30; i++) {
        const double loss = tr.step().loss;
        if (i == 0) first = loss;
        last = loss;
    }
    INFO("loss " << first << " -> " << last);
    CHECK(last < first - 0.5);  // it did train (from ≈ 4.2)

    const int C = c.n_embd, hs = C / c.n_head;
    for (int l = 0; l < c.n_layer; l++)
        for (int h = 0; h < c.n_head; h++) {
            const HeadCircuits hc = head_circuits(tr.model, l, h);
            const std::vector<double> sq = singular_values(hc.qk), so = singular_values(hc.ov);
            INFO("layer " << l << " head " << h << ": σ" << hs << "/σ1 = " << sq[hs - 1] / sq[0] << ", σ"
                 << hs + 1 << "/σ1 = " << sq[hs] / sq[0]);
            CHECK(numerical_rank(sq) == hs);  // ≤ d/H, and generic weights reach it
            CHECK(numerical_rank(so) == hs);
        }

    // The check can fail: the same product over all heads at once has full rank C.
    const float* Wq = tr.model.params.h[0].attn_w;                    // (C, C) all heads' Q rows
    const float* Wk = tr.model.params.h[0].attn_w + size_t(C) * C;    // (C, C)
    Matrix all{C, C, std::vector<double>(size_t(C) * C)};
    for (int i = 0; i < C; i++)
        for (int j = 0; j < C; j++)
            for (int k = 0; k < C; k++) all.at(i, j) += double(Wq[size_t(k) * C + i]) * Wk[size_t(k) * C + j];
    CHECK(numerical_rank(singular_values(all)) == C);

    // The circuits are the model's own: for two positions x (key, t = 0) and y (query, t = 1),
    // y · QK · xᵀ is head h's raw score q·k, and at t = 0 (which attends only to itself) the
    // sum over heads of x · OV_h is the attention output before its bias.
    GPT<float>& m = tr.model;
    const int tokens[2] = {5, 17};
    gpt_forward(m, tokens, nullptr, 1, 2);
    const BlockActivations<float>& s = m.acts.h[1];
    const float* x = s.ln_1;       // (C) position 0 after ln_1
    const float* y = s.ln_1 + C;   // (C) position 1
    std::vector<double> out(C, 0.0);
    for (int h = 0; h < c.n_head; h++) {
        const HeadCircuits hc = head_circuits(m, 1, h);
        double score = 0, qk = 0;
        for (int i = 0; i < C; i++)
            for (int j = 0; j < C; j++) score += double(y[i]) * hc.qk.at(i, j) * x[j];
        for (int k = 0; k < hs; k++) qk += double(s.qkv[3 * C + h * hs + k]) * s.qkv[C + h * hs + k];
        CHECK(score == Approx(qk).epsilon(1e-4).margin(1e-4));
        for (int j = 0; j < C; j++)
            for (int i = 0; i < C; i++) out[j] += double(x[i]) * hc.ov.at(i, j);
    }
    // the attention branch's output is what it added to the stream: res_2 − the block's input
    const float* stream_in = m.acts.h[0].res_3;
    for (int j = 0; j < C; j++)
        CHECK(out[j] ==
              Approx(double(s.res_2[j]) - stream_in[j] - m.params.h[1].attn_proj_b[j]).epsilon(1e-4).margin(1e-4));

    // `inspect --ckpt --circuits` shows the same: one row per head, both ranks 32.
    const std::string dir =
        (std::filesystem::temp_directory_path() / ("handgrad-circuits-" + std::to_string(getpid()))).string();
    std::filesystem::create_directories(dir);
    tr.save(dir + "/ckpt.safetensors");
    int status = 0;
    const std::string shown = run_inspect("--ckpt=" + dir + "/ckpt.safetensors --circuits", status);
    std::filesystem::remove_all(dir);
    INFO(shown);
    REQUIRE(status == 0);
    const std::regex row(R"(^\s+(\d+)\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s+(\d+)\s+\S+\s+\S+$)");
    int rows = 0;
    std::istringstream in(shown);
    for (std::string l; std::getline(in, l);) {
        std::smatch mt;
        if (!std::regex_match(l, mt, row)) continue;
        rows++;
        CHECK(std::stoi(mt[3]) == hs);
        CHECK(std::stoi(mt[4]) == hs);
    }
    CHECK(rows == c.n_layer * c.n_head);
}

// ---------------------------------------------------------------------------------------------
// The numbers as `build/inspect` prints them.

TEST_CASE("inspect prints the lesson's numbers", "[numbers][apps]") {
    int status = 0;
    SECTION("--preset=lesson14: the parameter table line for line, FLOPs, budget") {
        const std::string out = run_inspect("--preset=lesson14", status);
        INFO(out);
        REQUIRE(status == 0);
        for (const std::string& line : lesson14_parameter_table(preset("lesson14"))) CHECK(has_line(out, line));
        CHECK(has_line(out, "Token embedding           3200"));
        CHECK(out.find("blocks share 0.9682") != std::string::npos);
        CHECK(out.find("404,224") != std::string::npos);
        CHECK(out.find("1,212,672") != std::string::npos);
        CHECK(out.find("(2.03 % of the weights' forward)") != std::string::npos);
        CHECK(out.find("C ≈ 5.06e+12 FLOPs") != std::string::npos);
    }
    SECTION("--preset=gpt2: both counts and the lesson's FLOPs") {
        const std::string out = run_inspect("--preset=gpt2", status);
        INFO(out);
        REQUIRE(status == 0);
        CHECK(out.find("124,439,808") != std::string::npos);
        CHECK(out.find("without them 124,402,944") != std::string::npos);
        CHECK(out.find("36,864 difference") != std::string::npos);
        CHECK(out.find("forward, weights 247,229,952; training, weights 741,689,856") != std::string::npos);
        CHECK(out.find("C ≈ 1.86e+18 FLOPs") != std::string::npos);
    }
    SECTION("--residual_norms and --causality on lesson14") {
        const std::string out = run_inspect("--preset=lesson14 --residual_norms --causality", status);
        INFO(out);
        REQUIRE(status == 0);
        CHECK(out.find("as initialised") != std::string::npos);
        CHECK(out.find("1/√(2L)") != std::string::npos);
        CHECK(out.find("position   7: max |dZ| = 0 ") != std::string::npos);
        CHECK(out.find("position   8") != std::string::npos);
        size_t changed = 0;
        for (size_t at = out.find("changed"); at != std::string::npos; at = out.find("changed", at + 1)) changed++;
        CHECK(changed == 1);
        CHECK(out.find("7 of the 7 earlier positions bit-identical") != std::string::npos);
    }
    SECTION("--json carries the lesson's table and the budget") {
        const std::string out = run_inspect("--preset=lesson14 --json", status);
        REQUIRE(status == 0);
        CHECK(out.find("\"total_without_attention_biases\": 205440") != std::string::npos);
        CHECK(out.find("Per-block (× 4 )           49728") != std::string::npos);
    }
}

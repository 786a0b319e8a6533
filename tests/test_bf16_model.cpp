// test_bf16_model.cpp — mixed precision in the model and the trainer: the linear layer's bf16
// products against double, the whole step's gradients against the float step's, the way flash
// attention's bf16 tiles take, the copies the optimizers keep, checkpoints across dtypes, and
// exact resume within one.
//
// The bound on a product (tests/test_bf16.cpp): with u = 2⁻⁸ bf16's unit roundoff and ε = 2⁻²⁴
// float's, an entry Σ_k a_k·b_k computed from bf16-rounded inputs with float sums is off by at
// most (2u + u² + K·ε)·Σ_k |a_k·b_k| from the exact sum of the float inputs.
//
// The whole step's gradients: each gradient is the float step's gradient after the rounding
// errors of the products on its path have passed through the layers in between. To first
// order the relative errors of a chain of products add. Through one block the longest chain
// runs through six products in the forward: c_attn, attention's q·kᵀ and P·v (bf16 too since
// attention's products are, lib/layers/attention.h), attn.c_proj, c_fc, mlp.c_proj; then
// lm_head; so 6L + 1 to the loss. The backward from the loss down to a tensor has as many again
// (each linear's dinp, and attention's dP then dq or dk). Each adds at most (2u + K·ε)·κ relative
// error, κ = Σ|a·b| / |Σ a·b| its cancellation. Summed in norm over a tensor, κ is about one (the
// products of these models do not cancel: their inputs are activations and weights, not
// differences of near-equal numbers). The softmax turns a score's error δ into a relative error δ
// of its probability, δ ≤ 2u·Σ|q·k|/√hs: below 2u while the scores are small, as at init. So
//   ‖g_bf16 − g_f32‖ / ‖g_f32‖ ≤ P·(2u + K_max·ε),   P = 2·(6L + 1) products on a path.
// For the course model (L = 4, K_max = B·T = 384 rows in dW): P = 50, so the bound is
// 50 · (0.0078 + 0.00002) ≈ 0.39. (Before attention ran in bf16 the chain had four products per
// block, P = 2·(4L + 1) = 34.) It is a worst case (every rounding error the same sign, none damped
// by the layers between); rounding errors of random sign add like √P, and the test prints what
// it measures: about 0.006–0.008, ≈ √50 · u / 4.
#include "tests/catch.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <unistd.h>
#include <vector>

#include "lib/checkpoint/checkpoint.h"
#include "lib/core/rng.h"
#include "lib/data/dataset.h"
#include "lib/kernels/matmul_bf16.h"
#include "lib/layers/flash_attention.h"
#include "lib/layers/linear.h"
#include "lib/model/gpt.h"
#include "lib/model/memory_check.h"
#include "lib/text/char_tokenizer.h"
#include "lib/train/trainer.h"
#include "tests/gradcheck.h"

using namespace hg;
namespace fs = std::filesystem;

static const double kU = std::ldexp(1.0, -8), kEps = std::ldexp(1.0, -24);

TEST_CASE("linear in bf16: out, dinp and dweight within the product bound of the double twin", "[bf16][linear]") {
    const int N = 50, C = 72, OC = 40;
    const auto inp = test::randn<float>(size_t(N) * C, 1), w = test::randn<float>(size_t(OC) * C, 2, 0.1);
    const auto bias = test::randn<float>(OC, 3), dout = test::randn<float>(size_t(N) * OC, 4);
    const auto dw0 = test::randn<float>(size_t(OC) * C, 5), db0 = test::randn<float>(OC, 6);
    std::vector<bf16> inp16(inp.size()), w16(w.size()), dout16(dout.size());
    bf16_round(w16.data(), w.data(), w.size());
    bf16_round_parallel(inp16.data(), inp.data(), inp.size());  // as the layers before would
    bf16_round_parallel(dout16.data(), dout.data(), dout.size());
    std::vector<float> out(size_t(N) * OC), dinp(inp.size()), dw = dw0, db = db0;
    for (bool widen : {false, true}) {
        INFO((widen ? "widen" : matmul_bf16_describe()));
        matmul_bf16_force_widen(widen);
        dw = dw0, db = db0;
        linear_forward_bf16(out.data(), inp16.data(), w16.data(), bias.data(), N, C, OC);
        linear_backward_bf16(dinp.data(), dw.data(), db.data(), dout.data(), dout16.data(), inp16.data(), w16.data(),
                             N, C, OC);
        double worst = 0;
        for (int n = 0; n < N; n++)  // out = inp·Wᵀ + b: K = C
            for (int o = 0; o < OC; o++) {
                double exact = bias[o], mag = std::fabs(bias[o]);
                for (int c = 0; c < C; c++) {
                    exact += double(inp[n * C + c]) * w[o * C + c];
                    mag += std::fabs(double(inp[n * C + c]) * w[o * C + c]);
                }
                worst = std::max(worst, std::fabs(out[n * OC + o] - exact) / ((2 * kU + kU * kU + C * kEps) * mag));
            }
        for (int n = 0; n < N; n++)  // dinp = dout·W: K = OC
            for (int c = 0; c < C; c++) {
                double exact = 0, mag = 0;
                for (int o = 0; o < OC; o++) {
                    exact += double(dout[n * OC + o]) * w[o * C + c];
                    mag += std::fabs(double(dout[n * OC + o]) * w[o * C + c]);
                }
                worst = std::max(worst, std::fabs(dinp[n * C + c] - exact) / ((2 * kU + kU * kU + OC * kEps) * mag));
            }
        for (int o = 0; o < OC; o++) {  // dW += doutᵀ·inp: K = N, onto the float gradient
            double bias_exact = db0[o];
            for (int n = 0; n < N; n++) bias_exact += dout[n * OC + o];
            CHECK(std::fabs(db[o] - bias_exact) <= 1e-5 * (1 + std::fabs(bias_exact)));  // dbias sums float dout
            for (int c = 0; c < C; c++) {
                double exact = dw0[o * C + c], mag = std::fabs(dw0[o * C + c]);
                for (int n = 0; n < N; n++) {
                    exact += double(dout[n * OC + o]) * inp[n * C + c];
                    mag += std::fabs(double(dout[n * OC + o]) * inp[n * C + c]);
                }
                worst = std::max(worst, std::fabs(dw[o * C + c] - exact) / ((2 * kU + kU * kU + N * kEps) * mag));
            }
        }
        INFO("worst error " << worst << " of the bound");
        CHECK(worst <= 1.0);
        CHECK(worst > 0.01);  // the inputs really were rounded (a float product would sit near 0)
    }
    matmul_bf16_force_widen(false);
}

// n random tokens and targets below V, drawn in turn from Rng(seed).
static void random_batch(std::vector<int>& idx, std::vector<int>& tgt, size_t n, int V, uint64_t seed) {
    idx.resize(n), tgt.resize(n);
    Rng rng(seed);
    for (size_t i = 0; i < n; i++) idx[i] = int(rng.below(V)), tgt[i] = int(rng.below(V));
}

// The gradients of one forward and backward, tensor by tensor.
static std::vector<float> step_gradient(GPT<float>& m, const std::vector<int>& idx, const std::vector<int>& tgt,
                                        int B, int T) {
    gpt_zero_grad(m);
    gpt_forward(m, idx.data(), tgt.data(), B, T);
    gpt_backward(m);
    return std::vector<float>(m.grads_memory.data(), m.grads_memory.data() + m.num_parameters);
}

TEST_CASE("the bf16 step's gradients are the float step's within the bound from u and K", "[bf16][model]") {
    for (const char* name : {"course", "modern"}) {
        GPTConfig c = preset("course");
        if (std::string(name) == "modern")
            c.norm = NormKind::RMSNorm, c.pos = PosEncoding::Rope, c.mlp = MlpKind::SwiGLU, c.qk_norm = true;
        const int B = 6, T = c.block_size, L = c.n_layer;
        GPT<float> m;
        gpt_build(m, c, B, T);
        gpt_init(m, 11);
        std::vector<int> idx, tgt;
        random_batch(idx, tgt, size_t(B) * T, c.vocab_size, 5);
        const std::vector<float> g32 = step_gradient(m, idx, tgt, B, T);
        const double loss32 = m.loss;
        gpt_use_bf16(m);
        for (bool widen : {false, true}) {  // both ways of running the products
            matmul_bf16_force_widen(widen);
            const std::vector<float> g16 = step_gradient(m, idx, tgt, B, T);
            const double bound = 2.0 * (6 * L + 1) * (2 * kU + B * T * kEps);
            INFO(name << ", " << matmul_bf16_describe() << ": loss " << loss32 << " (float) and " << m.loss
                      << " (bf16); bound " << bound);
            CHECK(std::fabs(m.loss - loss32) <= bound * loss32);
            double worst = 0, largest_change = 0;
            for (const TensorSpec& t : m.table) {
                double diff = 0, ref = 0;
                for (size_t i = t.offset; i < t.offset + t.shape.numel(); i++)
                    diff += double(g16[i] - g32[i]) * (g16[i] - g32[i]), ref += double(g32[i]) * g32[i];
                if (ref == 0) continue;  // (none in this model; a zero gradient has nothing to compare)
                const double rel = std::sqrt(diff / ref);
                INFO(t.name << ": relative error " << rel);
                CHECK(rel <= bound);
                worst = std::max(worst, rel), largest_change = std::max(largest_change, diff);
            }
            WARN(name << ", " << matmul_bf16_describe() << ": worst relative gradient error " << worst
                      << " against the bound " << bound);
            CHECK(largest_change > 0);  // bf16 really ran
        }
    }
    matmul_bf16_force_widen(false);
}

// The model's flash attention runs its bf16 tiles the way the linear layers' bf16 products run:
// on the CPU's dot products (FlashProducts::Bf16Dot) when those are oneDNN's, widened otherwise.
// Checked bit for bit against the layer called with each way on the first block's qkv: its lse and
// its rounded output.
TEST_CASE("flash attention's bf16 tiles take the way of the bf16 products", "[bf16][model]") {
    GPTConfig c = preset("course");
    c.dropout = 0.0f;
    const int B = 3, T = c.block_size, C = c.n_embd, NH = c.n_head;
    GPT<float> m;
    gpt_build(m, c, B, T);  // the default plan: flash attention
    gpt_init(m, 7);
    std::vector<int> idx, tgt;
    random_batch(idx, tgt, size_t(B) * T, c.vocab_size, 3);
    gpt_use_bf16(m);
    const size_t n = flash_attention_bf16_scratch(T, C, NH);  // one thread's slice: the same bits as any other count
    std::vector<float> scratch(n), out(size_t(B) * T * C), lse(size_t(B) * NH * T);
    std::vector<bf16> out16(out.size());
    for (bool widen : {false, true}) {
        matmul_bf16_force_widen(widen);
        gpt_forward(m, idx.data(), tgt.data(), B, T);
        const BlockActivations<float>& a = m.acts.h[0];
        const FlashProducts expected =
            matmul_bf16_backend() == Bf16Backend::OneDNN ? FlashProducts::Bf16Dot : FlashProducts::Bf16Widened;
        for (FlashProducts products : {FlashProducts::Bf16Dot, FlashProducts::Bf16Widened}) {
            flash_attention_forward_bf16(out.data(), out16.data(), lse.data(), scratch.data(), n, a.qkv, B, T, C, NH,
                                         Dropout{}, products);
            // lse: float, from the scores' products (the model keeps only the rounded out, whose bits the
            // two ways may share)
            const bool same = std::memcmp(lse.data(), a.lse, lse.size() * sizeof(float)) == 0 &&
                              out16 == std::vector<bf16>(m.mixed.h[0].atty, m.mixed.h[0].atty + out16.size());
            INFO(matmul_bf16_describe() << "; the layer with "
                                        << (products == FlashProducts::Bf16Dot ? "Bf16Dot" : "Bf16Widened"));
            if (products == expected) CHECK(same);
            else if (flash_bf16_dot_available()) CHECK_FALSE(same);  // the two ways differ in the last bits here
        }
    }
    matmul_bf16_force_widen(false);
}

// A small corpus, the tiny model and the training config the trainer tests below share.
struct Run {
    Tokenizer tok;
    Split split;
    GPTConfig c;
    TrainConfig tc;
    Run() {
        std::string text;
        for (int i = 0; i < 60; i++)
            text += "the quick brown fox jumps over the lazy dog. pack my box with five dozen jugs!\n";
        tok = Tokenizer::from_text(text);
        split = split_train_val(tok.encode(text));
        c.vocab_size = tok.size(), c.block_size = 16, c.n_layer = 2, c.n_head = 2, c.n_embd = 32, c.dropout = 0.1f;
        tc.batch_size = 4, tc.gradient_accumulation_steps = 2, tc.max_iters = 12;
        tc.schedule = LrSchedule{1e-3, 1e-4, 3, 12, true};
        tc.dtype = DType::BFloat16;
    }
};

static std::string temp_dir(const std::string& name) {
    fs::path p = fs::temp_directory_path() / ("handgrad-" + name + "-" + std::to_string(getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    return p.string();
}

// The copies are the optimizer's: after every step, each equals its weight rounded.
static bool copies_fresh(const Trainer& t) {
    const GPT<float>& m = t.model;
    for (size_t i = 0; i < m.num_parameters; i++)
        if (m.mixed.weights[i] != bf16_from_float(m.params_memory.data()[i])) return false;
    return true;
}

TEST_CASE("bf16 training: copies refreshed by AdamW's and Muon's pass; float runs allocate none",
          "[bf16][train][muon]") {
    Run r;
    for (OptimizerKind opt : {OptimizerKind::AdamW, OptimizerKind::Muon})
        for (int R : {1, 2}) {
            INFO(to_string(opt) << ", batch threads " << R);
            r.tc.optimizer = opt, r.tc.batch_threads = R;
            Trainer t;
            t.start(r.c, r.tc, r.tok.vocab, r.split.train, r.split.val);
            REQUIRE(t.model.mixed.on());
            CHECK(copies_fresh(t));
            for (int i = 0; i < 3; i++) {
                t.step();
                CHECK(copies_fresh(t));
            }
            for (const GPT<float>& rep : t.replicas) CHECK(rep.mixed.weights == t.model.mixed.weights);
            // the memory check counts what was allocated
            const int rows = r.tc.batch_size / R;
            CHECK(t.model.mixed.acts_memory.size() == gpt_bf16_numbers(r.c, rows, r.c.block_size));
            const MemoryNeed with = memory_need(r.c, r.tc.batch_size, r.c.block_size, R, 3, true);
            const MemoryNeed without = memory_need(r.c, r.tc.batch_size, r.c.block_size, R, 3, false);
            CHECK(with.total() - without.total() ==
                  2.0 * (t.model.num_parameters + R * double(gpt_bf16_numbers(r.c, rows, r.c.block_size))));
        }
    r.tc.dtype = DType::Float32;
    Trainer f;
    f.start(r.c, r.tc, r.tok.vocab, r.split.train, r.split.val);
    CHECK(!f.model.mixed.on());
    CHECK(f.model.mixed.acts_memory.size() == 0);
    CHECK(f.model.mixed.weights_memory.size() == 0);
}

TEST_CASE("bf16: resume is exact within the dtype; checkpoints are float and load in either dtype",
          "[bf16][train][resume][checkpoint]") {
    Run r;
    const int N = 5;
    const std::string dir = temp_dir("bf16-resume"), path = dir + "/ckpt.safetensors";
    Trainer straight;
    straight.start(r.c, r.tc, r.tok.vocab, r.split.train, r.split.val);
    std::vector<double> losses_straight, losses_resumed;
    for (int i = 0; i < 2 * N; i++) losses_straight.push_back(straight.step().loss);

    Trainer first;
    first.start(r.c, r.tc, r.tok.vocab, r.split.train, r.split.val);
    for (int i = 0; i < N; i++) losses_resumed.push_back(first.step().loss);
    first.save(path);
    const Checkpoint ck = Checkpoint::load(path);
    CHECK(train_config_from_json(ck.progress.train_config).dtype == DType::BFloat16);
    Trainer second;
    second.resume(ck, r.tc, r.split.train, r.split.val);
    for (int i = 0; i < N; i++) losses_resumed.push_back(second.step().loss);
    CHECK(losses_resumed == losses_straight);
    CHECK(std::memcmp(straight.model.params_memory.data(), second.model.params_memory.data(),
                      straight.model.num_parameters * sizeof(float)) == 0);

    // The bf16 run's checkpoint resumed in float32: the same float weights, a float step after it,
    // whose loss is the bf16 step's to bf16 rounding (not bit-equal: the products differ).
    TrainConfig f32 = r.tc;
    f32.dtype = DType::Float32;
    Trainer as_float;
    as_float.resume(ck, f32, r.split.train, r.split.val);
    CHECK(!as_float.model.mixed.on());
    CHECK(std::memcmp(as_float.model.params_memory.data(), first.model.params_memory.data(),
                      first.model.num_parameters * sizeof(float)) == 0);
    const double loss = as_float.step().loss;
    CHECK(loss == Approx(losses_straight[N]).epsilon(0.02));
    CHECK(loss != losses_straight[N]);
    // And a float run's checkpoint resumed in bf16.
    as_float.save(path);
    Trainer back;
    back.resume(Checkpoint::load(path), r.tc, r.split.train, r.split.val);
    CHECK(back.model.mixed.on());
    CHECK(copies_fresh(back));
    CHECK(std::isfinite(back.step().loss));
    fs::remove_all(dir);
}

// The model's ActivationPlan (lib/model/config.h): which attention runs, flash or materialized,
// and what the forward keeps for the backward (--recompute). The two attentions compute the same
// function, so the model's loss and gradients agree within float rounding; recomputation repeats
// the forward's own arithmetic, so its gradients are the same bits as keeping everything, and so
// are a plan's that keeps no logits (the probabilities written over them); the memory check
// counts what each plan keeps; checkpoints do not depend on the plan.
#include "tests/catch.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "lib/core/rng.h"
#include "lib/model/gpt.h"
#include "lib/model/memory_check.h"
#include "lib/train/trainer.h"
#include "tests/gradcheck.h"
#include "tests/model_checks.h"

using namespace hg;
using hg::test::gradcheck;
namespace fs = std::filesystem;

namespace {

// One forward and backward of a float model built for `plan`, from gpt_init's weights (seed 1),
// on random tokens (seed 5), dropout on when the config has it: the loss and the whole gradient.
struct Pass {
    double loss = 0;
    std::vector<float> grads;
    std::vector<TensorSpec> table;
};

Pass run_pass(const GPTConfig& c, ActivationPlan plan, int B, int T, bool bf16 = false) {
    GPT<float> m;
    gpt_build<float>(m, c, B, c.block_size, nullptr, plan);
    if (bf16) gpt_use_bf16(m);
    gpt_init(m, 1);
    gpt_round_weights(m);
    std::vector<int> idx(size_t(B) * T), tgt(size_t(B) * T);
    Rng rng(5);
    for (size_t i = 0; i < idx.size(); i++)
        idx[i] = int(rng.below(c.vocab_size)), tgt[i] = int(rng.below(c.vocab_size));
    Pass p;
    p.loss = gpt_forward(m, idx.data(), tgt.data(), B, T, ForwardMode{true, 99});
    gpt_zero_grad(m);
    gpt_backward(m, 1.0f);
    p.grads.assign(m.grads_memory.data(), m.grads_memory.data() + m.num_parameters);
    p.table = m.table;
    return p;
}

// The largest |a - b| of a tensor over its largest |b|.
double tensor_error(const Pass& a, const Pass& b, const TensorSpec& t) {
    double diff = 0, scale = 0;
    for (size_t i = t.offset; i < t.offset + t.shape.numel(); i++) {
        diff = std::max(diff, double(std::fabs(a.grads[i] - b.grads[i])));
        scale = std::max(scale, double(std::fabs(b.grads[i])));
    }
    return scale > 0 ? diff / scale : diff;
}

GPTConfig tiny_config() {
    GPTConfig c;
    c.vocab_size = 11, c.block_size = 70, c.n_layer = 3, c.n_head = 2, c.n_embd = 16, c.dropout = 0.1f;
    c.bias = BiasLayout::GPT2;
    return c;
}

GPTConfig modern(GPTConfig c) {
    c.norm = NormKind::RMSNorm, c.pos = PosEncoding::Rope, c.mlp = MlpKind::SwiGLU, c.qk_norm = true;
    c.logit_softcap = 30.0f;
    return c;
}

// 3000 token ids below tiny_config's vocabulary of 11, from seed `seed`: a run's training text.
std::vector<int> random_ids(uint64_t seed) {
    std::vector<int> ids(3000);
    Rng rng(seed);
    for (int& t : ids) t = int(rng.below(11));
    return ids;
}

}  // namespace

TEST_CASE("flash and materialized attention: the model's loss and gradients agree within float tolerance",
          "[flash][model]") {
    // The course (T 64, hs 32: materialized runs its fused kernels) and the baby GPT (T 256, hs 64:
    // its products, dropout 0.2), each with a short batch; and the course's shape in today's block.
    struct Shape {
        const char* name;
        GPTConfig c;
        int B;
    };
    const Shape shapes[] = {{"course", preset("course"), 4},
                            {"shakespeare-char", preset("shakespeare-char"), 2},
                            {"course, modern block", modern(preset("course")), 4}};
    for (const Shape& s : shapes) {
        const int T = s.c.block_size;
        const Pass flash = run_pass(s.c, {AttentionKind::Flash}, s.B, T);
        const Pass materialized = run_pass(s.c, {AttentionKind::Materialized}, s.B, T);
        INFO(s.name << ": loss " << flash.loss << " against " << materialized.loss);
        CHECK(std::fabs(flash.loss - materialized.loss) <= 1e-6 * std::fabs(materialized.loss));
        double worst = 0;
        for (const TensorSpec& t : flash.table) {
            const double e = tensor_error(flash, materialized, t);
            INFO(t.name << ": largest difference " << e << " of the tensor's largest gradient");
            CHECK(e <= 2e-5);
            worst = std::max(worst, e);
        }
        CHECK(worst > 0);  // two layers ran, not one twice
    }
}

TEST_CASE("flash and materialized attention in bf16: the model's loss and gradients agree within bf16 tolerance",
          "[flash][model][bf16]") {
    // Each rounds other numbers to bf16 (flash: the unnormalised probabilities of a tile; materialized:
    // the normalised ones), so they agree to bf16's rounding, not float's.
    const GPTConfig c = preset("course");
    const Pass flash = run_pass(c, {AttentionKind::Flash}, 4, c.block_size, true);
    const Pass materialized = run_pass(c, {AttentionKind::Materialized}, 4, c.block_size, true);
    CHECK(std::fabs(flash.loss - materialized.loss) <= 1e-3 * std::fabs(materialized.loss));
    for (const TensorSpec& t : flash.table) {
        INFO(t.name);
        CHECK(tensor_error(flash, materialized, t) <= 0.05);
    }
}

TEST_CASE("whole-model gradient check with flash attention over several tiles (double)", "[flash][model][gradcheck]") {
    // T 70 > the 64-position tile: two key tiles, one of them above the diagonal for the first block
    // of rows, the second block's diagonal tile partial. Dropout on.
    GPTConfig c = tiny_config();
    c.n_layer = 2, c.vocab_size = 7, c.n_embd = 8;
    const int B = 1, T = c.block_size;
    for (Recompute recompute : {Recompute::None, Recompute::Block}) {
        GPT<double> m;
        gpt_build<double>(m, c, B, T, nullptr, ActivationPlan{AttentionKind::Flash, recompute});
        hg::test::randomise(m, 3);
        std::vector<int> idx(T), tgt(T);
        Rng rng(4);
        for (int t = 0; t < T; t++) idx[t] = int(rng.below(c.vocab_size)), tgt[t] = int(rng.below(c.vocab_size));
        const ForwardMode mode{true, 777};
        gpt_forward(m, idx.data(), tgt.data(), B, T, mode);
        gpt_zero_grad(m);
        gpt_backward(m, 1.0);
        const std::vector<double> analytic(m.grads_memory.data(), m.grads_memory.data() + m.num_parameters);
        const auto loss = [&] { return gpt_forward(m, idx.data(), tgt.data(), B, T, mode); };
        for (const TensorSpec& t : m.table) {
            hg::test::GradCheck opt;
            opt.max_checks = 40;
            const auto r = gradcheck(m.params_memory.data() + t.offset, t.shape.numel(), analytic.data() + t.offset,
                                     loss, opt);
            INFO("recompute " << to_string(recompute) << ", " << t.name << ": " << r.str());
            CHECK(r.ok);
        }
    }
}

TEST_CASE("recompute: the gradients are the same bits as keeping everything", "[recompute][model]") {
    const GPTConfig configs[] = {tiny_config(), modern(tiny_config())};
    for (const GPTConfig& c : configs)
        for (AttentionKind attention : {AttentionKind::Flash, AttentionKind::Materialized})
            for (bool bf16 : {false, true})
                for (int T : {c.block_size, 33}) {  // the whole block, and a forward shorter than the model
                    const Pass kept = run_pass(c, {attention, Recompute::None}, 3, T, bf16);
                    for (Recompute recompute : {Recompute::Attention, Recompute::Block}) {
                        INFO((c.qk_norm ? "modern" : "gpt2") << " block, " << to_string(attention) << " attention, "
                             << (bf16 ? "bf16" : "float") << ", T " << T << ", recompute " << to_string(recompute));
                        const Pass again = run_pass(c, {attention, recompute}, 3, T, bf16);
                        CHECK(again.loss == kept.loss);
                        const size_t bytes = kept.grads.size() * sizeof(float);
                        CHECK(std::memcmp(again.grads.data(), kept.grads.data(), bytes) == 0);
                    }
                }
}

TEST_CASE("a plan that keeps no logits: the same loss and gradient bits, one (N, V) buffer less", "[model][memory]") {
    const GPTConfig configs[] = {tiny_config(), modern(tiny_config())};  // the second soft-caps its logits
    for (const GPTConfig& c : configs)
        for (bool bf16 : {false, true}) {
            const bool capped = c.logit_softcap > 0.0f;
            INFO((capped ? "modern" : "gpt2") << " block, " << (bf16 ? "bf16" : "float"));
            ActivationPlan no_logits;
            no_logits.keep_logits = false;
            const Pass kept = run_pass(c, {}, 3, 33, bf16), dropped = run_pass(c, no_logits, 3, 33, bf16);
            CHECK(dropped.loss == kept.loss);
            CHECK(std::memcmp(dropped.grads.data(), kept.grads.data(), kept.grads.size() * sizeof(float)) == 0);
            // The probabilities take the logits' memory, unless the soft cap's backward needs them.
            Carver<float> one_buffer{nullptr};  // counts what one (N, V) buffer takes of an arena
            one_buffer.take(3 * size_t(c.block_size) * c.vocab_size);
            CHECK(gpt_activation_floats(c, 3, c.block_size, {}) - gpt_activation_floats(c, 3, c.block_size, no_logits) ==
                  (capped ? 0 : one_buffer.used));
            GPT<float> m;
            gpt_build<float>(m, c, 3, c.block_size, nullptr, no_logits);
            CHECK((m.acts.probs == m.acts.logits) == !capped);
        }
}

TEST_CASE("recompute: a training run with batch threads and accumulation ends on the same bits", "[recompute][train]") {
    const std::vector<int> ids = random_ids(8);
    const GPTConfig c = tiny_config();
    TrainConfig tc;
    tc.batch_size = 4, tc.batch_threads = 2, tc.gradient_accumulation_steps = 2, tc.max_iters = 3;
    tc.schedule = LrSchedule{1e-3, 1e-4, 1, 3, true};
    std::vector<float> first;
    for (DType dtype : {DType::Float32, DType::BFloat16})
        for (Recompute recompute : {Recompute::None, Recompute::Attention, Recompute::Block}) {
            INFO(to_string(dtype) << ", recompute " << to_string(recompute));
            tc.dtype = dtype, tc.activations = training_plan(AttentionKind::Flash, recompute);
            Trainer t;
            t.start(c, tc, std::vector<std::string>(11, "x"), ids, ids);
            for (int i = 0; i < tc.max_iters; i++) t.step();
            const float* p = t.model.params_memory.data();
            const std::vector<float> w(p, p + t.model.num_parameters);
            if (recompute == Recompute::None) first = w;
            else CHECK(std::memcmp(w.data(), first.data(), w.size() * sizeof(float)) == 0);
        }
}

TEST_CASE("the memory check counts what each plan keeps", "[flash][recompute][memory]") {
    std::vector<int> ids(3000);
    for (size_t i = 0; i < ids.size(); i++) ids[i] = int(i % 11);
    const GPTConfig c = tiny_config();
    for (AttentionKind attention : {AttentionKind::Flash, AttentionKind::Materialized})
        for (Recompute recompute : {Recompute::None, Recompute::Attention, Recompute::Block})
            for (bool bf16 : {false, true}) {
                INFO(to_string(attention) << " attention, recompute " << to_string(recompute)
                                          << (bf16 ? ", bf16" : ""));
                TrainConfig tc;
                tc.batch_size = 4, tc.batch_threads = 2, tc.eval_iters = 1;
                tc.dtype = bf16 ? DType::BFloat16 : DType::Float32, tc.activations = training_plan(attention, recompute);
                Trainer t;
                t.start(c, tc, std::vector<std::string>(11, "x"), ids, ids);
                const MemoryNeed need = memory_need(c, tc.batch_size, c.block_size, 2, 3, bf16, tc.activations);
                const double bf16_bytes =
                    2.0 * double(t.model.mixed.acts_memory.size() + t.replicas[0].mixed.acts_memory.size());
                CHECK(need.activation_bytes == 4.0 * double(t.activation_floats()) + bf16_bytes);
            }

    // What each keeps, on the baby GPT at a context of 1024, batch 64: materialized attention keeps
    // B·NH·T² floats a block (1.5 GiB) and as many of working space; flash one per row.
    GPTConfig baby = preset("shakespeare-char");
    baby.block_size = 1024;
    const int B = 64, T = 1024;
    const auto gib = [&](AttentionKind a, Recompute r) {
        return memory_need(baby, B, T, 1, 3, false, {a, r}).activation_bytes / double(1 << 30);
    };
    const double att_gib = 4.0 * B * baby.n_head * double(T) * T / double(1 << 30);  // one block's att
    CHECK(gib(AttentionKind::Materialized, Recompute::None) - gib(AttentionKind::Flash, Recompute::None) >
          (baby.n_layer + 1) * att_gib - 0.1);
    // refused at 21.1 GiB before the flash layer; keeping each block's input alone, under 4 GiB
    CHECK(gib(AttentionKind::Flash, Recompute::Block) <= 4.0);
    CHECK(gib(AttentionKind::Materialized, Recompute::Attention) < gib(AttentionKind::Materialized, Recompute::None) -
                                                                    (baby.n_layer - 1) * att_gib + 0.1);
    for (AttentionKind a : {AttentionKind::Flash, AttentionKind::Materialized}) {
        INFO(to_string(a));
        CHECK(gib(a, Recompute::Block) < gib(a, Recompute::Attention));
        CHECK(gib(a, Recompute::Attention) < gib(a, Recompute::None));
    }
    // Block keeps a block's output (B·T·C floats) per block and one block's working set.
    const double per_block = 4.0 * B * T * baby.n_embd / double(1 << 30);
    GPTConfig deeper = baby;
    deeper.n_layer = baby.n_layer + 1;
    const ActivationPlan block{AttentionKind::Flash, Recompute::Block};
    const double grown = memory_need(deeper, B, T, 1, 3, false, block).activation_bytes / double(1 << 30);
    CHECK(std::fabs(grown - gib(AttentionKind::Flash, Recompute::Block) - per_block) < 1e-3);
}

TEST_CASE("flash attention in the model: the same bits run after run", "[flash][determinism]") {
    const GPTConfig c = preset("shakespeare-char");
    for (bool bf16 : {false, true}) {
        INFO((bf16 ? "bf16" : "float"));
        const Pass a = run_pass(c, {}, 2, 100, bf16), b = run_pass(c, {}, 2, 100, bf16);
        CHECK(a.loss == b.loss);
        CHECK(std::memcmp(a.grads.data(), b.grads.data(), a.grads.size() * sizeof(float)) == 0);
    }
}

TEST_CASE("checkpoints do not depend on the attention: either resumes the other's", "[flash][checkpoint][resume]") {
    const std::vector<int> ids = random_ids(9);
    const GPTConfig c = tiny_config();
    TrainConfig tc;
    tc.batch_size = 4, tc.max_iters = 6, tc.batch_threads = 1;
    tc.schedule = LrSchedule{1e-3, 1e-4, 1, 6, true};
    const fs::path dir = fs::temp_directory_path() / ("handgrad-plan-ckpt-" + std::to_string(getpid()));
    fs::create_directories(dir);
    const std::string path = (dir / "ckpt.safetensors").string();
    Trainer straight;  // flash, the default
    straight.start(c, tc, std::vector<std::string>(11, "x"), ids, ids);
    std::vector<double> losses;
    for (int i = 0; i < tc.max_iters; i++) losses.push_back(straight.step().loss);

    Trainer first;
    first.start(c, tc, std::vector<std::string>(11, "x"), ids, ids);
    for (int i = 0; i < 3; i++) first.step();
    first.save(path);
    const Checkpoint ck = Checkpoint::load(path);
    CHECK(train_config_from_json(ck.progress.train_config).activations.attention == AttentionKind::Flash);
    TrainConfig other = tc;
    other.activations = {AttentionKind::Materialized, Recompute::Block};
    Trainer resumed;
    resumed.resume(ck, other, ids, ids);
    CHECK(std::memcmp(resumed.model.params_memory.data(), first.model.params_memory.data(),
                      first.model.num_parameters * sizeof(float)) == 0);
    for (int i = 3; i < tc.max_iters; i++) {
        const double loss = resumed.step().loss;
        CHECK(loss == Approx(losses[i]).epsilon(1e-5));
    }
    // and back: the materialized run's checkpoint written the same way, resumed with flash
    resumed.save(path);
    Trainer back;
    back.resume(Checkpoint::load(path), tc, ids, ids);
    CHECK(std::memcmp(back.model.params_memory.data(), resumed.model.params_memory.data(),
                      resumed.model.num_parameters * sizeof(float)) == 0);
    CHECK(std::isfinite(back.step().loss));
    fs::remove_all(dir);
}

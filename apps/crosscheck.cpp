// crosscheck — the handgrad half of the PyTorch parity check (tools/crosscheck.py is the other).
//
//   build/crosscheck --preset=course --ckpt=cc/course.safetensors --out=cc/course.dump.safetensors
//   build/crosscheck ... --corrupt_grad=transformer.h.0.mlp.c_fc.weight   (must make the check fail)
//
// Initialises a model from the flags, writes it as a checkpoint (--ckpt), then runs, on S = 3
// fixed random batches, what one training step does: forward, backward, clip the global
// gradient norm, warmup-cosine lr, AdamW (with --optimizer=muon: Muon for the blocks' matrices,
// at the same lr, and AdamW for the rest, as the trainer runs them). It does this twice from the same weights: with
// GPT<float> (the fast path: sgemm + Highway kernels) and with GPT<double> (the scalar twins,
// started from the float weights widened exactly). Everything lands in one safetensors file:
//
//   idx, targets                    I64 (S, B, T)   batch s feeds step s
//   f32.logits / f64.logits         (B, T, V)       of batch 0, before any step
//   f32.loss / f64.loss             F64 (S)         the loss of each step's batch
//   f32.grad_norm / f64.grad_norm   F64 (S)         the global gradient norm before clipping
//   f32.grad.<name> / f64.grad.<name>   every parameter's gradient on batch 0 (before clipping)
//   f32.step3.<name> / f64.step3.<name> every parameter after the S AdamW steps
//   f32.grad1.<name>, f32.grad2.<name>  the float run's gradients of steps 1 and 2 (before
//                                   clipping): the reference replays its optimizer on them
//   metadata: config, lr (JSON array of the S learning rates, in double), adamw (JSON of the
//   float32 betas/eps/weight_decay, printed exactly), optimizer, muon_momentum, grad_clip,
//   dropout_keys (JSON array of the S forward keys as decimal strings: the reference recomputes
//   the dropout masks from them).
#include <omp.h>
#include <cblas.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <map>

#include "apps/flags.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/core/rng.h"
#include "lib/kernels/adamw.h"
#include "lib/optim/adamw.h"
#include "lib/optim/muon.h"
#include "lib/optim/schedule.h"
#include "lib/train/train_config.h"

using namespace hg;

namespace {

constexpr int kSteps = 3;

// A vocabulary of V distinct single characters in code point order (what Tokenizer wants):
// the printable ASCII range first, then Latin Extended.
std::vector<std::string> synthetic_vocab(int V) {
    std::vector<std::string> vocab;
    for (int i = 0; i < V; i++) {
        const char32_t cp = i < 94 ? char32_t(33 + i) : char32_t(0x100 + i);
        std::string s;
        if (cp < 0x80) {
            s += char(cp);
        } else if (cp < 0x800) {
            s += char(0xC0 | (cp >> 6)), s += char(0x80 | (cp & 0x3F));
        } else {
            s += char(0xE0 | (cp >> 12)), s += char(0x80 | ((cp >> 6) & 0x3F)), s += char(0x80 | (cp & 0x3F));
        }
        vocab.push_back(s);
    }
    return vocab;
}

// One step's settings, the same for the float and the double run.
struct Run {
    int B, T;
    const std::vector<int>* idx;      // (S, B, T)
    const std::vector<int>* targets;  // (S, B, T)
    std::vector<uint64_t> keys;       // (S) dropout keys
    std::vector<double> lrs;          // (S)
    AdamWConfig adamw;
    OptimizerKind optimizer;
    float muon_momentum;
    double grad_clip;
    std::string corrupt;              // a tensor name whose gradient is scaled by 1.01, or ""
};

// What a run produces, in double (exact for the float run too).
struct Result {
    std::vector<double> logits, loss, grad_norm;
    std::map<std::string, std::vector<double>> grad, step3;
    std::vector<std::map<std::string, std::vector<double>>> later_grads;  // steps 1 .. S-1
};

template <typename real>
void corrupt_gradient(GPT<real>& model, const std::string& name) {
    if (name.empty()) return;
    for (const TensorSpec& t : model.table)
        if (t.name == name) {
            real* g = model.grads_memory.data() + t.offset;
            for (size_t i = 0; i < t.shape.numel(); i++) g[i] *= real(1.01);  // a 1 % error
            return;
        }
    fail("--corrupt_grad: no tensor '{}' in this config", name);
}

// The float run: the library's own norm, clip factor, adamw_step and Muon, as Trainer::step uses them.
void optimizer_step(GPT<float>& model, float* m, float* v, const std::vector<ParamSpan>& spans, Muon<float>& muon,
                    const Run& run, int s, double* norm) {
    *norm = grad_global_norm(model.grads_memory.data(), model.num_parameters);
    adamw_step(model.params_memory.data(), model.grads_memory.data(), m, v, spans, float(run.lrs[s]),
               run.adamw, s + 1, clip_scale(*norm, run.grad_clip));
    muon.step(model.params_memory.data(), model.grads_memory.data(), m, run.lrs[s], run.adamw.weight_decay,
              run.muon_momentum, {}, clip_scale(*norm, run.grad_clip));
}

// The double run: the same operations in double (clip_grad_norm's formula, AdamW's scalar twin
// with every scalar widened from the same float config, Muon<double>).
void optimizer_step(GPT<double>& model, double* m, double* v, const std::vector<ParamSpan>& spans, Muon<double>& muon,
                    const Run& run, int s, double* norm) {
    double* g = model.grads_memory.data();
    double sum = 0;
    for (size_t i = 0; i < model.num_parameters; i++) sum += g[i] * g[i];
    *norm = std::sqrt(sum);
    if (run.grad_clip > 0 && *norm > run.grad_clip) {
        const double scale = run.grad_clip / (*norm + 1e-6);
        for (size_t i = 0; i < model.num_parameters; i++) g[i] *= scale;
    }
    const AdamWConfig& a = run.adamw;
    const double bc1 = 1.0 - std::pow(double(a.beta1), s + 1), bc2 = 1.0 - std::pow(double(a.beta2), s + 1);
    for (const ParamSpan& p : spans)
        adamw_update_scalar<double>(model.params_memory.data() + p.offset, g + p.offset, m + p.offset,
                                    v + p.offset, p.size, run.lrs[s], a.beta1, a.beta2, a.eps,
                                    p.decays ? a.weight_decay : 0.0, bc1, bc2, 1.0);
    muon.step(model.params_memory.data(), g, m, run.lrs[s], a.weight_decay, run.muon_momentum);
}

template <typename real>
Result run_steps(GPT<real>& model, const Run& run) {
    Result r;
    const size_t P = model.num_parameters, BT = size_t(run.B) * run.T;
    std::vector<real> m(P, real(0)), v(P, real(0));
    OptimizerGroups groups = optimizer_groups(model.table, run.optimizer);
    const std::vector<ParamSpan> spans = std::move(groups.adamw);
    Muon<real> muon;
    muon.build(groups.muon);
    const bool training = model.config.dropout > 0.0f;
    for (int s = 0; s < kSteps; s++) {
        gpt_zero_grad(model);
        const int* idx = run.idx->data() + s * BT;
        const int* targets = run.targets->data() + s * BT;
        r.loss.push_back(gpt_forward(model, idx, targets, run.B, run.T, ForwardMode{training, run.keys[s]}));
        gpt_backward(model);
        corrupt_gradient(model, run.corrupt);
        if (s == 0) r.logits.assign(model.acts.logits, model.acts.logits + BT * model.config.vocab_size);
        auto& grads = s == 0 ? r.grad : r.later_grads.emplace_back();
        for (const TensorSpec& t : model.table) {
            const real* g = model.grads_memory.data() + t.offset;
            grads[t.name].assign(g, g + t.shape.numel());
        }
        double norm = 0;
        optimizer_step(model, m.data(), v.data(), spans, muon, run, s, &norm);
        r.grad_norm.push_back(norm);
    }
    for (const TensorSpec& t : model.table) {
        const real* w = model.params_memory.data() + t.offset;
        r.step3[t.name].assign(w, w + t.shape.numel());
    }
    return r;
}

std::vector<size_t> dims(const Shape& s) { return std::vector<size_t>(s.dims.begin(), s.dims.begin() + s.ndim); }

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"handgrad crosscheck: reference data for the PyTorch parity check"};
    ModelFlags model_flags;
    model_flags.add(app);
    std::string ckpt_path, out_path, corrupt, optimizer = "adamw";
    float muon_momentum = 0.95f;
    int B = 2, T = 0, threads = 0;
    uint64_t seed = 1234;
    LrSchedule schedule{1e-3, 1e-4, 1, 4, true};  // steps 0, 1, 2: warmup, peak, cosine
    AdamWConfig adamw{0.9f, 0.95f, 1e-8f, 0.1f};
    double grad_clip = 1.0;
    app.add_option("--ckpt", ckpt_path, "write the initial model here (a handgrad checkpoint)")->required();
    app.add_option("--out", out_path, "write the reference data here (safetensors)")->required();
    app.add_option("--batch_size", B)->capture_default_str();
    app.add_option("--seq_len", T, "tokens per row (default: block_size)");
    app.add_option("--seed", seed, "weights, batches and dropout keys")->capture_default_str();
    app.add_option("--learning_rate", schedule.learning_rate)->capture_default_str();
    app.add_option("--min_lr", schedule.min_lr)->capture_default_str();
    app.add_option("--warmup_iters", schedule.warmup_iters)->capture_default_str();
    app.add_option("--lr_decay_iters", schedule.lr_decay_iters)->capture_default_str();
    app.add_option("--beta1", adamw.beta1)->capture_default_str();
    app.add_option("--beta2", adamw.beta2)->capture_default_str();
    app.add_option("--eps", adamw.eps)->capture_default_str();
    app.add_option("--weight_decay", adamw.weight_decay)->capture_default_str();
    app.add_option("--grad_clip", grad_clip, "0 disables")->capture_default_str();
    app.add_option("--optimizer", optimizer, "adamw | muon (Muon's lr: learning_rate)")->capture_default_str();
    app.add_option("--muon_momentum", muon_momentum)->capture_default_str();
    app.add_option("--corrupt_grad", corrupt, "scale this tensor's gradient by 1.01 (the check must fail)");
    app.add_option("--threads", threads);
    MatmulFlag matmul;
    matmul.add(app);
    return run_app(app, argc, argv, [&] {
        const GPTConfig config = model_flags.config();
        if (T == 0) T = config.block_size;
        check(B >= 1, "--batch_size must be positive (got {})", B);
        check_threads(threads, /*zero_is_default=*/true);
        check(T >= 1 && T <= config.block_size, "--seq_len must be in [1, block_size = {}] (got {})",
              config.block_size, T);
        TrainConfig knobs;  // the same checks as train's: AdamW's, the schedule's, the clip's
        knobs.schedule = schedule, knobs.adamw = adamw, knobs.grad_clip = grad_clip;
        knobs.validate();
        matmul.validate();
        if (threads > 0) omp_set_num_threads(threads);
        openblas_set_num_threads(omp_get_max_threads());

        matmul.apply_forward(config, B, T, omp_get_max_threads());
        GPT<float> model;
        gpt_build(model, config, B, T);
        gpt_init(model, seed);
        save_checkpoint(ckpt_path, model, synthetic_vocab(config.vocab_size), TrainProgress{}, nullptr, nullptr);
        GPT<double> twin;  // the same weights, widened exactly
        gpt_build(twin, config, B, T);
        for (size_t i = 0; i < model.num_parameters; i++) twin.params_memory.data()[i] = model.params_memory.data()[i];

        Rng rng(mix64(seed ^ 0x62617463ULL));
        const size_t n = size_t(kSteps) * B * T;
        std::vector<int> idx(n), targets(n);
        for (size_t i = 0; i < n; i++) {
            idx[i] = int(rng.below(config.vocab_size));
            targets[i] = int(rng.below(config.vocab_size));
        }
        const MuonConfig muon{0, muon_momentum, 0};
        muon.validate();
        Run run{B, T, &idx, &targets, {}, {}, adamw, parse_optimizer(optimizer), muon_momentum, grad_clip, corrupt};
        for (int s = 0; s < kSteps; s++) {
            run.keys.push_back(mix64(seed ^ mix64(uint64_t(s) + 0x64726f70ULL)));  // "drop"
            run.lrs.push_back(lr_at(schedule, s));
        }
        const Result r32 = run_steps(model, run);
        const Result r64 = run_steps(twin, run);

        // Write everything (SafetensorsWriter keeps pointers: all storage lives until save()).
        SafetensorsWriter w;
        std::vector<int64_t> idx64(idx.begin(), idx.end()), targets64(targets.begin(), targets.end());
        const std::vector<size_t> batch_shape{size_t(kSteps), size_t(B), size_t(T)};
        w.add("idx", Dtype::I64, batch_shape, idx64.data());
        w.add("targets", Dtype::I64, batch_shape, targets64.data());
        std::vector<std::vector<float>> keep32;  // float copies of the f32 run's values
        keep32.reserve(1 + (kSteps + 1) * model.table.size());
        auto add32 = [&](const std::string& name, std::vector<size_t> shape, const std::vector<double>& x) {
            keep32.emplace_back(x.begin(), x.end());  // exact: the values were floats
            w.add(name, Dtype::F32, std::move(shape), keep32.back().data());
        };
        auto add64 = [&](const std::string& name, std::vector<size_t> shape, const std::vector<double>& x) {
            w.add(name, Dtype::F64, std::move(shape), x.data());
        };
        const std::vector<size_t> logits_shape{size_t(B), size_t(T), size_t(config.vocab_size)};
        add32("f32.logits", logits_shape, r32.logits);
        add64("f64.logits", logits_shape, r64.logits);
        for (const auto* res : {&r32, &r64}) {
            const std::string p = res == &r32 ? "f32." : "f64.";
            add64(p + "loss", {size_t(kSteps)}, res->loss);
            add64(p + "grad_norm", {size_t(kSteps)}, res->grad_norm);
        }
        for (const TensorSpec& t : model.table) {
            add32("f32.grad." + t.name, dims(t.shape), r32.grad.at(t.name));
            add64("f64.grad." + t.name, dims(t.shape), r64.grad.at(t.name));
            add32("f32.step3." + t.name, dims(t.shape), r32.step3.at(t.name));
            add64("f64.step3." + t.name, dims(t.shape), r64.step3.at(t.name));
            for (int k = 1; k < kSteps; k++)
                add32(fmt::format("f32.grad{}.{}", k, t.name), dims(t.shape), r32.later_grads[k - 1].at(t.name));
        }
        nlohmann::json keys = nlohmann::json::array();
        for (uint64_t k : run.keys) keys.push_back(std::to_string(k));
        w.set_metadata("config", config_to_json(config));
        w.set_metadata("lr", nlohmann::json(run.lrs).dump());
        w.set_metadata("adamw",
                       fmt::format(R"({{"beta1": {:.9g}, "beta2": {:.9g}, "eps": {:.9g}, "weight_decay": {:.9g}}})",
                                   adamw.beta1, adamw.beta2, adamw.eps, adamw.weight_decay));
        w.set_metadata("optimizer", to_string(run.optimizer));
        w.set_metadata("muon_momentum", fmt::format("{:.9g}", muon_momentum));
        w.set_metadata("grad_clip", fmt::format("{:.17g}", grad_clip));
        w.set_metadata("dropout_keys", keys.dump());
        w.set_metadata("corrupt_grad", corrupt);
        w.save(out_path);
        fmt::print(
            "crosscheck: {} parameters, B={} T={}, loss f32 {:.6f} f64 {:.6f}, grad norms (f32) {:.4f} {:.4f} "
            "{:.4f}{}\n",
            model.num_parameters, B, T, r32.loss[0], r64.loss[0], r32.grad_norm[0], r32.grad_norm[1], r32.grad_norm[2],
            corrupt.empty() ? "" : ", corrupted gradient: " + corrupt);
        return 0;
    });
}

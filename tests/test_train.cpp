// Training: gradient accumulation, the overfit smoke test, exact resume, checkpoint round trips.
#include "tests/catch.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include "lib/checkpoint/checkpoint.h"
#include "lib/data/dataset.h"
#include "lib/text/char_tokenizer.h"
#include "lib/train/trainer.h"

using namespace hg;
namespace fs = std::filesystem;

// A small corpus every test can use without the real data: a few sentences repeated.
static std::string small_corpus() {
    std::string s;
    for (int i = 0; i < 60; i++)
        s += "the quick brown fox jumps over the lazy dog. pack my box with five dozen jugs!\n";
    return s;
}

static GPTConfig tiny_config(int V) {
    GPTConfig c;
    c.vocab_size = V, c.block_size = 16, c.n_layer = 2, c.n_head = 2, c.n_embd = 32;
    return c;
}

static std::string temp_dir(const std::string& name) {
    fs::path p = fs::temp_directory_path() / ("handgrad-" + name + "-" + std::to_string(getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    return p.string();
}

TEST_CASE("gradient accumulation: K micro-batches of B equal one batch of K*B", "[train][accumulation]") {
    const std::string text = small_corpus();
    Tokenizer tok = Tokenizer::from_text(text);
    std::vector<int> ids = tok.encode(text);
    GPTConfig c = tiny_config(tok.size());
    const int B = 3, K = 4, T = c.block_size;
    std::vector<int> idx(K * B * T), tgt(K * B * T);
    Rng rng(5);
    sample_batch(idx.data(), tgt.data(), ids, K * B, T, rng);

    GPT<float> big, small;
    gpt_build(big, c, K * B, T);
    gpt_build(small, c, B, T);
    gpt_init(big, 9);
    gpt_init(small, 9);
    gpt_zero_grad(big);
    const double loss_big = gpt_forward(big, idx.data(), tgt.data(), K * B, T);
    gpt_backward(big, 1.0f);
    gpt_zero_grad(small);
    double loss_small = 0;
    for (int k = 0; k < K; k++) {
        loss_small += gpt_forward(small, idx.data() + k * B * T, tgt.data() + k * B * T, B, T) / K;
        gpt_backward(small, 1.0f / K);
    }
    CHECK(loss_small == Approx(loss_big).epsilon(1e-6));
    // float sums in a different order: agree to float precision relative to the gradient's scale
    double max_diff = 0, max_abs = 0;
    for (size_t i = 0; i < big.num_parameters; i++) {
        max_diff = std::max(max_diff, double(std::fabs(big.grads_memory.data()[i] - small.grads_memory.data()[i])));
        max_abs = std::max(max_abs, double(std::fabs(big.grads_memory.data()[i])));
    }
    INFO("max |Δgrad| " << max_diff << " vs max |grad| " << max_abs);
    CHECK(max_abs > 0);
    CHECK(max_diff <= 1e-5 * max_abs);
}

// The gradient Trainer::step takes: K micro-batches of B rows, split over R batch threads of
// B/R rows each, every backward scaled by 1/(K·N·R) (N = 1 here), summed. Whatever K and R, it
// must be gpt_backward's own gradient of the mean loss over the same K·B rows, with dloss = 1:
// a wrong scale, a replica's gradient counted twice or not at all, or rows taken from the wrong
// place would each move it by far more than float rounding.
TEST_CASE("the trainer's gradient: K micro-batches × R batch threads = one batch of K·B rows", "[train][gradient]") {
    const std::string text = small_corpus();
    Tokenizer tok = Tokenizer::from_text(text);
    std::vector<int> ids = tok.encode(text);
    Split split = split_train_val(ids);
    const GPTConfig c = tiny_config(tok.size());  // no dropout: the masks would differ
    const int rows = 12, T = c.block_size;         // K·B for every setting below
    TrainConfig tc;
    tc.grad_clip = 0;  // clipping off: step's grad_norm is the gradient's own norm
    tc.seed = 21;

    // The reference: the same initial weights and rows, in one forward and one backward.
    GPT<float> ref;
    gpt_build(ref, c, rows, T);
    gpt_init(ref, tc.seed);
    std::vector<int> idx(rows * T), tgt(rows * T);
    {
        Trainer probe;  // only for its batch sampler's first state
        tc.batch_size = rows;
        probe.start(c, tc, tok.vocab, split.train, split.val);
        Rng rng = probe.batch_rng;
        sample_batch(idx.data(), tgt.data(), split.train, rows, T, rng, "train");  // one draw per row, as K draws of B
    }
    gpt_zero_grad(ref);
    const double ref_loss = gpt_forward(ref, idx.data(), tgt.data(), rows, T);
    gpt_backward(ref, 1.0f);
    const float* g = ref.grads_memory.data();
    double ref_norm = 0, max_abs = 0;
    for (size_t i = 0; i < ref.num_parameters; i++) {
        ref_norm += double(g[i]) * g[i];
        max_abs = std::max(max_abs, double(std::fabs(g[i])));
    }
    ref_norm = std::sqrt(ref_norm);
    REQUIRE(max_abs > 0);

    struct Setting { int B, K, R; };
    for (const Setting& st : {Setting{12, 1, 1}, Setting{6, 2, 1}, Setting{3, 4, 1}, Setting{12, 1, 2},
                              Setting{12, 1, 3}, Setting{6, 2, 2}, Setting{4, 3, 2}, Setting{6, 2, 3}}) {
        INFO("B " << st.B << ", K " << st.K << ", R " << st.R);
        TrainConfig t = tc;
        t.batch_size = st.B;
        t.gradient_accumulation_steps = st.K;
        t.batch_threads = st.R;
        Trainer a;
        a.start(c, t, tok.vocab, split.train, split.val);
        const double loss = a.accumulate_gradient();
        CHECK(loss == Approx(ref_loss).epsilon(1e-6));
        double max_diff = 0;
        for (size_t i = 0; i < ref.num_parameters; i++)
            max_diff = std::max(max_diff, double(std::fabs(a.model.grads_memory.data()[i] - g[i])));
        INFO("max |Δgrad| " << max_diff << " vs max |grad| " << max_abs);
        CHECK(max_diff <= 1e-5 * max_abs);
        // The step itself, from the same start: the same loss and the gradient's norm.
        Trainer b;
        b.start(c, t, tok.vocab, split.train, split.val);
        const StepResult r = b.step();
        CHECK(r.loss == loss);
        CHECK(r.grad_norm == Approx(ref_norm).epsilon(1e-5));
        // and AdamW was fed that gradient, unscaled: after one step from m = 0, m = (1 − β1)·g
        const float c1 = float(1.0 - double(t.adamw.beta1));
        size_t mismatches = 0;
        for (size_t i = 0; i < ref.num_parameters; i++)
            mismatches += b.m.data()[i] != c1 * a.model.grads_memory.data()[i];
        CHECK(mismatches == 0);
    }
}

TEST_CASE("overfitting one fixed batch: loss falls from ln V to well under 1 (the plumbing works)",
          "[train][overfit]") {
    const std::string text = small_corpus();
    Tokenizer tok = Tokenizer::from_text(text);
    std::vector<int> ids = tok.encode(text);
    GPTConfig c = tiny_config(tok.size());
    c.n_embd = 64, c.n_head = 4;
    const int B = 4, T = c.block_size;
    std::vector<int> idx(B * T), tgt(B * T);
    Rng rng(11);
    sample_batch(idx.data(), tgt.data(), ids, B, T, rng);
    // A Trainer whose "training set" is exactly one batch, repeated.
    TrainConfig tc;
    tc.batch_size = B, tc.schedule = LrSchedule{3e-3, 3e-3, 5, 100, true}, tc.adamw.weight_decay = 0;
    Trainer tr;
    tr.start(c, tc, tok.vocab, ids, ids);
    const double first = gpt_forward(tr.model, idx.data(), tgt.data(), B, T);
    CHECK(std::fabs(first - std::log(double(tok.size()))) < 0.1);
    double loss = first;
    std::vector<ParamSpan> spans = tr.spans;
    for (int step = 1; step <= 80; step++) {
        gpt_zero_grad(tr.model);
        loss = gpt_forward(tr.model, idx.data(), tgt.data(), B, T);
        gpt_backward(tr.model, 1.0f);
        clip_grad_norm(tr.model.grads_memory.data(), tr.model.num_parameters, 1.0);
        adamw_step(tr.model.params_memory.data(), tr.model.grads_memory.data(), tr.m.data(), tr.v.data(), spans,
                   float(lr_at(tc.schedule, step - 1)), tc.adamw, step);
    }
    loss = gpt_forward(tr.model, idx.data(), tgt.data(), B, T);
    INFO("loss " << first << " -> " << loss << " after 80 steps");
    CHECK(loss < 0.5);
}

static std::vector<float> weights(const Trainer& t) {
    return std::vector<float>(t.model.params_memory.data(), t.model.params_memory.data() + t.model.num_parameters);
}

TEST_CASE("resume is exact: N steps + save + resume + N steps == 2N steps", "[train][resume][checkpoint]") {
    const std::string text = small_corpus();
    Tokenizer tok = Tokenizer::from_text(text);
    std::vector<int> ids = tok.encode(text);
    Split split = split_train_val(ids);
    GPTConfig c = tiny_config(tok.size());
    c.dropout = 0.1f;  // dropout masks must resume exactly too
    TrainConfig tc;
    tc.batch_size = 4, tc.gradient_accumulation_steps = 2, tc.max_iters = 12;
    tc.schedule = LrSchedule{1e-3, 1e-4, 3, 12, true};
    const int N = 6;
    const std::string dir = temp_dir("resume");
    const std::string path = dir + "/ckpt.safetensors";

    Trainer straight;
    straight.start(c, tc, tok.vocab, split.train, split.val);
    std::vector<double> losses_straight;
    for (int i = 0; i < 2 * N; i++) losses_straight.push_back(straight.step().loss);

    Trainer first;
    first.start(c, tc, tok.vocab, split.train, split.val);
    std::vector<double> losses_resumed;
    for (int i = 0; i < N; i++) losses_resumed.push_back(first.step().loss);
    first.estimate_loss(split.val);  // evaluation must not disturb the training stream
    first.save(path);
    Checkpoint ck = Checkpoint::load(path);
    CHECK(ck.progress.iter_num == N);
    Trainer second;
    second.resume(ck, tc, split.train, split.val);
    for (int i = 0; i < N; i++) losses_resumed.push_back(second.step().loss);

    CHECK(losses_resumed == losses_straight);
    const auto a = weights(straight), b = weights(second);
    CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(straight.m.data(), second.m.data(), a.size() * sizeof(float)) == 0);
    fs::remove_all(dir);
}

TEST_CASE("batch threads: each thread's replica takes its rows; the step is one step of the whole batch",
          "[train][batch_threads]") {
    const std::string text = small_corpus();
    Tokenizer tok = Tokenizer::from_text(text);
    std::vector<int> ids = tok.encode(text);
    Split split = split_train_val(ids);
    TrainConfig tc;
    tc.batch_size = 6, tc.gradient_accumulation_steps = 2, tc.max_iters = 6;
    tc.schedule = LrSchedule{3e-3, 3e-4, 2, 6, true};
    auto train = [&](int batch_threads, float dropout, std::vector<double>* evals = nullptr) {
        GPTConfig c = tiny_config(tok.size());
        c.dropout = dropout;
        TrainConfig t = tc;
        t.batch_threads = batch_threads;
        auto trainer = std::make_unique<Trainer>();
        trainer->start(c, t, tok.vocab, split.train, split.val);
        for (int i = 0; i < 6; i++) trainer->step();
        if (evals) evals->push_back(trainer->estimate_loss(split.val));
        return trainer;
    };
    // Three replicas of 2 rows: the model holds the weights, each replica only views them.
    auto three = train(3, 0.1f);
    REQUIRE(three->replicas.size() == 2);
    CHECK(three->model.max_B == 2);
    CHECK(three->replicas[1].params.wte == three->model.params.wte);
    CHECK(three->replicas[1].params_memory.size() == 0);
    // The same run twice, dropout on: every bit the same (the masks depend on the batch thread's index,
    // never on timing).
    auto again = train(3, 0.1f);
    const auto a = weights(*three), b = weights(*again);
    CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(three->v.data(), again->v.data(), a.size() * sizeof(float)) == 0);
    // Dropout off: the same steps as one thread over all 6 rows, to float rounding (the sums
    // over rows are split in three; see the MPI equivalence test for the size of that).
    std::vector<double> e1, e3;
    auto one = train(1, 0.0f, &e1), split3 = train(3, 0.0f, &e3);
    const auto w1 = weights(*one), w3 = weights(*split3);
    double diff = 0, scale = 0;
    for (size_t i = 0; i < w1.size(); i++)
        diff = std::max(diff, double(std::fabs(w1[i] - w3[i]))), scale = std::max(scale, double(std::fabs(w1[i])));
    CHECK(diff > 0);  // not the same bits: the sums run in another order ...
    CHECK(diff < 1e-4 * scale);  // ... but the same numbers (one step moves weights by ~3e-3)
    CHECK(e3[0] == Approx(e1[0]).epsilon(1e-5));  // evaluation splits its rows the same way
    // And a batch the threads cannot split evenly is refused.
    TrainConfig bad = tc;
    bad.batch_threads = 4;
    REQUIRE_THROWS_WITH(bad.validate(),
                        Catch::Contains("batch_threads (4) must be positive and divide batch_size (6)"));
}

TEST_CASE("checkpoints: round trip, nanoGPT names, stand-in biases, and validation", "[checkpoint]") {
    const std::string dir = temp_dir("ckpt");
    const std::string path = dir + "/ckpt.safetensors";
    GPTConfig c = preset("course");
    GPT<float> m;
    gpt_build(m, c, 1, 8);
    gpt_init(m, 3);
    std::vector<std::string> vocab;
    for (int i = 0; i < 65; i++) vocab.push_back(std::string(1, char(' ' + i)));
    TrainProgress prog;
    prog.iter_num = 42, prog.best_val_loss = 1.5;
    save_checkpoint(path, m, vocab, prog, nullptr, nullptr);

    Checkpoint ck = Checkpoint::load(path);
    CHECK(ck.progress.iter_num == 42);
    CHECK(ck.progress.best_val_loss == 1.5);
    CHECK(ck.vocab == vocab);
    CHECK_FALSE(ck.has_optimizer);
    CHECK(config_to_json(ck.config) == config_to_json(c));
    // nanoGPT's names and shapes, and a zero c_attn.bias for nanoGPT's bias=True layout
    CHECK(ck.file.get("transformer.h.0.attn.c_attn.weight").shape == Shape({384, 128}));
    CHECK(ck.file.get("transformer.h.3.attn.c_attn.bias").shape == Shape({384}));
    CHECK(ck.file.get("lm_head.weight").shape == Shape({65, 128}));
    GPT<float> m2;
    gpt_build(m2, ck.config, 1, 8);
    ck.read_weights(m2);
    CHECK(std::memcmp(m.params_memory.data(), m2.params_memory.data(), m.num_parameters * sizeof(float)) == 0);

    SECTION("missing, extra, misshapen tensors and bad metadata are named") {
        // Hand-written files: the course config's metadata over other tensors.
        auto write = [&](int n_layer, const std::string& extra, const std::string& config_json) {
            GPTConfig other = c;
            other.n_layer = n_layer;
            GPT<float> m3;
            gpt_build(m3, other, 1, 8);
            SafetensorsWriter w;
            std::vector<float> zeros(3 * 128, 0.0f);
            for (const TensorSpec& t : m3.table)
                w.add(t.name, Dtype::F32,
                      std::vector<size_t>(t.shape.dims.begin(), t.shape.dims.begin() + t.shape.ndim),
                      m3.params_memory.data() + t.offset);
            for (int l = 0; l < n_layer; l++)
                w.add("transformer.h." + std::to_string(l) + ".attn.c_attn.bias", Dtype::F32, {384}, zeros.data());
            if (!extra.empty()) w.add(extra, Dtype::F32, {1}, zeros.data());
            w.set_metadata("config", config_json);
            std::string v = "[";
            for (int i = 0; i < 65; i++)
                v += (i ? "," : "") + std::string("\"") + char('A' + (i % 26)) + std::to_string(i) + "\"";
            w.set_metadata("vocab", v + "]");
            w.set_metadata("iter_num", "1");
            w.set_metadata("best_val_loss", "2.0");
            w.save(path);
        };
        write(3, "", config_to_json(c));
        REQUIRE_THROWS_WITH(Checkpoint::load(path),
                            Catch::Contains("transformer.h.3.ln_1.weight") && Catch::Contains("missing"));
        write(4, "transformer.h.9.junk", config_to_json(c));
        REQUIRE_THROWS_WITH(Checkpoint::load(path), Catch::Contains("unexpected tensor 'transformer.h.9.junk'"));
        write(4, "", "{\"vocab_size\": 65}");
        REQUIRE_THROWS_WITH(Checkpoint::load(path), Catch::Contains("block_size"));
        GPTConfig wide = c;
        wide.n_embd = 64;
        write(4, "", config_to_json(wide));
        REQUIRE_THROWS_WITH(Checkpoint::load(path), Catch::Contains("shape"));
        write(4, "", "not json");
        REQUIRE_THROWS_AS(Checkpoint::load(path), Error);
    }
    SECTION("a truncated checkpoint is refused with a clear message, never a crash") {
        const auto size = fs::file_size(path);
        for (double frac : {0.0, 0.001, 0.5, 0.999}) {
            fs::copy_file(path, dir + "/cut.safetensors", fs::copy_options::overwrite_existing);
            fs::resize_file(dir + "/cut.safetensors", size_t(size * frac));
            REQUIRE_THROWS_AS(Checkpoint::load(dir + "/cut.safetensors"), Error);
        }
    }
    SECTION("a foreign file is refused") {
        FILE* f = std::fopen((dir + "/foreign.safetensors").c_str(), "wb");
        std::fputs("This is just some text, not a checkpoint at all. It is long enough to have a header.", f);
        std::fclose(f);
        REQUIRE_THROWS_AS(Checkpoint::load(dir + "/foreign.safetensors"), Error);
    }
    SECTION("a vocabulary that disagrees with vocab_size is refused") {
        std::vector<std::string> short_vocab(vocab.begin(), vocab.end() - 1);
        REQUIRE_THROWS_WITH(save_checkpoint(path, m, short_vocab, prog, nullptr, nullptr),
                            Catch::Contains("vocabulary"));
    }
    fs::remove_all(dir);
}

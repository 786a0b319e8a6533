// The matmul backends (lib/kernels/matmul.h): OpenBLAS and oneDNN agree to float rounding on
// every product the model makes, each training run repeats itself bit for bit, and
// --matmul=auto measures, remembers and says what it chose (lib/train/matmul_choice.h).
#include "tests/catch.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <tuple>
#include <thread>

#include "lib/core/rng.h"
#include "lib/kernels/matmul.h"
#include "lib/kernels/matmul_bf16.h"
#include "lib/kernels/matmul_split.h"
#include "lib/kernels/peak.h"
#include "lib/kernels/simd.h"
#include "lib/train/batch_threads.h"
#include "lib/train/matmul_choice.h"
#include "lib/train/startup_cache.h"
#include "lib/train/trainer.h"
#include "tests/app_runner.h"

using namespace hg;
using namespace hg::test;

namespace {

// Sets the backend for the scope and puts back the one before.
struct UseBackend {
    MatmulBackend before = matmul_current();
    explicit UseBackend(MatmulBackend b) { matmul_use(b); }
    ~UseBackend() { matmul_use(before); }
};

struct Operands {
    std::vector<float> a, b, c;  // c: the whole (M, ldc) buffer, beta's input
};

Operands random_operands(const MatmulCall& m, uint64_t seed) {
    Rng rng(seed);
    Operands o;
    o.a.resize(size_t(m.form == MatmulForm::TN ? m.K : m.M) * m.lda);
    o.b.resize(size_t(m.form == MatmulForm::NT ? m.N : m.K) * m.ldb);
    o.c.resize(size_t(m.M) * m.ldc);
    for (float& x : o.a) x = float(rng.uniform() * 2 - 1);
    for (float& x : o.b) x = float(rng.uniform() * 2 - 1);
    for (float& x : o.c) x = float(rng.uniform() * 2 - 1);
    return o;
}

float A(const MatmulCall& m, const Operands& o, int i, int k) {
    return m.form == MatmulForm::TN ? o.a[size_t(k) * m.lda + i] : o.a[size_t(i) * m.lda + k];
}
float B(const MatmulCall& m, const Operands& o, int k, int j) {
    return m.form == MatmulForm::NT ? o.b[size_t(j) * m.ldb + k] : o.b[size_t(k) * m.ldb + j];
}

// The largest error of `got` (the (M, ldc) buffer after the call) against the product in
// double, each entry relative to Σ|a·b| + |beta·c| (what float rounding scales with), in units
// of (K + 2)·u: within float rounding means at most 1. Entries between N and ldc must be the
// input's, to the bit (NaN otherwise).
double error_in_rounding_units(const MatmulCall& m, const Operands& in, const std::vector<float>& got) {
    double worst = 0;
    const double unit = (m.K + 2) * std::ldexp(1.0, -24);
    for (int i = 0; i < m.M; i++) {
        for (int j = 0; j < m.N; j++) {
            const double c0 = m.beta * double(in.c[size_t(i) * m.ldc + j]);
            double sum = c0, scale = std::fabs(c0);
            for (int k = 0; k < m.K; k++) {
                const double p = double(A(m, in, i, k)) * double(B(m, in, k, j));
                sum += p, scale += std::fabs(p);
            }
            worst = std::max(worst, std::fabs(got[size_t(i) * m.ldc + j] - sum) / (scale * unit + 1e-300));
        }
        for (int j = m.N; j < m.ldc; j++)
            if (got[size_t(i) * m.ldc + j] != in.c[size_t(i) * m.ldc + j])
                return std::numeric_limits<double>::quiet_NaN();
    }
    return worst;
}

std::vector<float> run_with(MatmulBackend backend, const MatmulCall& m, const Operands& o) {
    UseBackend use(backend);
    std::vector<float> c = o.c;
    matmul_run(m, c.data(), o.a.data(), o.b.data());
    return c;
}

std::vector<int> random_ids(int V, size_t n) {
    std::vector<int> ids(n);
    Rng rng(5);
    for (int& t : ids) t = int(rng.below(V));
    return ids;
}

}  // namespace

TEST_CASE("--matmul's values: auto, a backend's name, or one error", "[matmul]") {
    CHECK_FALSE(parse_matmul_flag("auto").has_value());
    CHECK(parse_matmul_flag("openblas") == MatmulBackend::OpenBLAS);
    CHECK_THROWS_WITH(parse_matmul_flag("cuda"), Catch::Contains("--matmul must be auto, openblas, onednn or highway"));
    CHECK_THROWS_AS(parse_matmul_flag("OpenBLAS"), Error);
    CHECK_THROWS_AS(parse_matmul_flag(""), Error);
    if (matmul_available(MatmulBackend::OneDNN)) CHECK(parse_matmul_flag("onednn") == MatmulBackend::OneDNN);
    else CHECK_THROWS_WITH(parse_matmul_flag("onednn"), Catch::Contains("no oneDNN"));
    CHECK(matmul_backends().front() == MatmulBackend::OpenBLAS);
}

TEST_CASE("every product the model makes: each backend within float rounding of the exact product, β = 0 and 1",
          "[matmul]") {
    GPTConfig c = preset("course");
    c.n_layer = 2, c.block_size = 24, c.vocab_size = 40;
    GPTConfig modern = c;
    modern.norm = NormKind::RMSNorm, modern.pos = PosEncoding::Rope, modern.mlp = MlpKind::SwiGLU,
    modern.qk_norm = true;
    modern.n_head = 2,
    modern.block_size = 80;  // heads of 64 over 80 positions: attention's products, not its fused kernel
    // (materialized attention's: the flash layer runs its tiles in kernels of its own, never the backend's)
    const std::vector<int> ids = random_ids(c.vocab_size, 4000);
    std::vector<MatmulCall> calls;
    const auto add = [&](const std::vector<MatmulCall>& more) {
        for (const MatmulCall& m : more) {
            bool seen = false;
            for (const MatmulCall& o : calls) seen = seen || o.same_call(m);
            if (!seen) calls.push_back(m);
        }
    };
    for (const GPTConfig& config : {c, modern})
        for (int R : {1, 2}) {
            TrainConfig tc;
            tc.batch_size = 4, tc.batch_threads = R, tc.activations.attention = AttentionKind::Materialized;
            add(training_step_matmuls(config, tc, ids));
        }
    add(forward_matmuls(c, 3, c.block_size));
    // The recording saw every form, both betas, strided operands (attention's heads inside a
    // (B, T, 3C) buffer) and products inside our parallel regions.
    const auto any = [&](auto pred) { return std::any_of(calls.begin(), calls.end(), pred); };
    CHECK(any([](const MatmulCall& m) { return m.form == MatmulForm::NN; }));
    CHECK(any([](const MatmulCall& m) { return m.form == MatmulForm::NT; }));
    CHECK(any([](const MatmulCall& m) { return m.form == MatmulForm::TN; }));
    CHECK(any([](const MatmulCall& m) { return m.beta == 0; }));
    CHECK(any([](const MatmulCall& m) { return m.beta == 1; }));
    CHECK(any([](const MatmulCall& m) { return m.form == MatmulForm::NT && m.lda > m.K && m.ldb > m.K; }));
    CHECK(any([](const MatmulCall& m) { return m.nested(); }));

    int checked = 0;
    for (MatmulCall m : calls)
        for (float beta : {0.0f, 1.0f}) {
            m.beta = beta;
            const Operands in = random_operands(m, 11 + checked);
            for (MatmulBackend backend : matmul_backends()) {
                INFO(to_string(backend) << " " << to_string(m.form) << " M " << m.M << " N " << m.N << " K " << m.K
                                        << " ld " << m.lda << "/" << m.ldb << "/" << m.ldc << " beta " << beta);
                const double e = error_in_rounding_units(m, in, run_with(backend, m, in));
                CHECK(e <= 1.0);  // NaN (a write past N) fails too
            }
            checked++;
        }
    CHECK(checked == 2 * int(calls.size()));

    SECTION("the check can fail: one entry off by a thousandth of its scale, or a write into the stride") {
        const MatmulCall m{MatmulForm::NT, 5, 6, 64, 70, 64, 8, 1.0f, 1, 1};
        const Operands in = random_operands(m, 3);
        std::vector<float> good = run_with(MatmulBackend::OpenBLAS, m, in);
        CHECK(error_in_rounding_units(m, in, good) <= 1.0);
        std::vector<float> off = good;
        off[2 * m.ldc + 3] += 1e-3f * 64 * 0.25f;
        CHECK(error_in_rounding_units(m, in, off) > 1.0);
        std::vector<float> stride = good;
        stride[m.N] += 1;
        CHECK(std::isnan(error_in_rounding_units(m, in, stride)));
    }
}

// Outside our parallel regions a backend may split a product over the threads (matmul.cpp): on
// sizes no thread count divides, every row and column of c must still be computed once, by
// exactly one block, every term once, by one run of K, and a thread setting must give the same
// bits every time.
TEST_CASE("products split over 3, 5 and 16 threads on odd sizes: every entry within rounding, the same bits twice",
          "[matmul]") {
    const int threads_before = omp_get_max_threads();
    using F = MatmulForm;
    // the last three are weight gradients' shapes (a small c, many terms), whose K is cut
    for (int threads : {3, 5, 16}) {
        CHECK(plan_matmul_split(40, 70, 5001, threads).k_parts > 1);
        CHECK(plan_matmul_split(33, 20, 4100, threads).k_parts > 1);
    }
    for (auto [form, M, N, K] : {std::tuple{F::NT, 1000, 37, 129}, {F::NN, 37, 1000, 65}, {F::TN, 301, 259, 17},
                                 {F::NT, 259, 301, 1}, {F::TN, 40, 70, 5001}, {F::NT, 33, 20, 4100},
                                 {F::NN, 40, 70, 5001}}) {
        for (float beta : {0.0f, 1.0f}) {
            const MatmulCall m{form, M, N, K, form == F::TN ? M : K, form == F::NT ? K : N + 3, N + 3, beta, 1, 1};
            const Operands in = random_operands(m, 11);
            for (MatmulBackend backend : matmul_backends())
                for (int threads : {3, 5, 16}) {
                    INFO(to_string(backend) << ", " << threads << " threads, " << to_string(form) << " M " << M
                                            << " N " << N << " K " << K << " beta " << beta);
                    omp_set_num_threads(threads);
                    const std::vector<float> once = run_with(backend, m, in), twice = run_with(backend, m, in);
                    omp_set_num_threads(threads_before);
                    CHECK(error_in_rounding_units(m, in, once) <= 1.0);
                    CHECK(std::memcmp(once.data(), twice.data(), once.size() * sizeof(float)) == 0);
                }
        }
    }
}

TEST_CASE("the calls of one and two blocks carried to n_layer are the whole model's calls", "[matmul]") {
    GPTConfig c = preset("course");
    c.n_layer = 4, c.block_size = 16, c.vocab_size = 30, c.dropout = 0.1f;
    TrainConfig tc;
    tc.batch_size = 4, tc.batch_threads = 2;
    const std::vector<int> ids = random_ids(c.vocab_size, 2000);
    const std::vector<MatmulCall> carried = training_step_matmuls(c, tc, ids);
    const std::vector<MatmulCall> whole = record_matmuls([&] {
        Trainer t;
        t.start(c, tc, std::vector<std::string>(c.vocab_size, ""), ids, ids);
        t.step();
    });
    REQUIRE(carried.size() == whole.size());
    long total = 0;
    for (const MatmulCall& w : whole) {
        const auto it =
            std::find_if(carried.begin(), carried.end(), [&](const MatmulCall& m) { return m.same_call(w); });
        REQUIRE(it != carried.end());
        CHECK(it->count == w.count);
        total += w.count;
    }
    CHECK(total > 4 * 6);  // at least forward and backward of every block's linears
}

// matmul_choice.h: under bf16 the products with bf16 inputs are recorded as bf16 calls, the same
// whichever way runs them (nothing is computed while recording). Attention's products are bf16
// too (materialized attention's sgemm path, at every shape; flash attention's are kernels of its
// own). On oneDNN's bf16 primitive a bf16 call's time is one for every backend, so a step of bf16
// calls alone leaves the backend nothing to decide, and the choice says so instead of timing noise.
TEST_CASE("auto's recording under bf16: every product a bf16 call, whichever way runs them; on oneDNN's bf16 "
          "the backend has nothing to decide", "[matmul][bf16]") {
    GPTConfig c = preset("course");
    c.n_layer = 2, c.block_size = 16, c.vocab_size = 30;
    TrainConfig tc;
    tc.batch_size = 4, tc.batch_threads = 1, tc.dtype = DType::BFloat16;
    tc.activations.attention = AttentionKind::Materialized;
    const std::vector<int> ids = random_ids(c.vocab_size, 2000);
    const auto total = [&](const std::vector<MatmulCall>& calls, bool bf16) {
        long n = 0;
        for (const MatmulCall& m : calls) n += m.bf16 == bf16 ? m.count : 0;
        return n;
    };
    for (Bf16Backend way : matmul_bf16_backends()) {
        INFO(to_string(way));
        matmul_bf16_use(way);
        const std::vector<MatmulCall> calls = training_step_matmuls(c, tc, ids);
        // (2 blocks · 4 linear layers + the head) · 3 products, and attention's 2 + 4 per (b, h)
        // and block (T 16: one row block)
        CHECK(total(calls, true) == (2 * 4 + 1) * 3 + 2 * tc.batch_size * c.n_head * 6);
        CHECK(total(calls, false) == 0);
        TrainConfig flash = tc;  // flash attention: no product of matmul.h's
        flash.activations.attention = AttentionKind::Flash;
        CHECK(total(training_step_matmuls(c, flash, ids), true) == (2 * 4 + 1) * 3);
        // Timed: widened, each backend its own time; on oneDNN's bf16, one time for all.
        const std::vector<double> ms = time_matmul_calls(calls, matmul_backends(), 1);
        for (double t : ms) CHECK(t > 0);
        if (way == Bf16Backend::OneDNN) {
            CHECK(no_float_products(ms));
            TempDir tmp("handgrad-bf16-auto");
            const CacheDir cache(tmp.path.string());
            const MatmulChoice choice = choose_matmul("auto", "bf16 test", [&] { return calls; }, 1);
            CHECK(choice.backend == matmul_backends()[0]);
            CHECK(choice.why.find("no float products") != std::string::npos);
        }
    }
    matmul_bf16_force_widen(false);
}

TEST_CASE("a training run on each backend repeats itself bit for bit, and the two agree to float rounding",
          "[matmul][train]") {
    GPTConfig c = preset("course");
    c.n_layer = 2, c.block_size = 32, c.vocab_size = 50, c.dropout = 0.1f;
    const std::vector<int> ids = random_ids(c.vocab_size, 5000);
    const auto losses = [&](MatmulBackend backend, int batch_threads) {
        UseBackend use(backend);
        TrainConfig tc;
        tc.batch_size = 4, tc.batch_threads = batch_threads;
        tc.schedule = LrSchedule{1e-3, 1e-4, 2, 10, true};
        Trainer t;
        t.start(c, tc, std::vector<std::string>(c.vocab_size, ""), ids, ids);
        std::vector<double> out;
        for (int i = 0; i < 4; i++) out.push_back(t.step().loss);
        out.push_back(double(t.model.params_memory.data()[0]));
        return out;
    };
    for (int R : {1, 2}) {
        const std::vector<double> base = losses(MatmulBackend::OpenBLAS, R);
        CHECK(base == losses(MatmulBackend::OpenBLAS, R));
        for (MatmulBackend b : matmul_backends()) {
            INFO(to_string(b) << ", batch_threads " << R);
            const std::vector<double> run = losses(b, R);
            CHECK(run == losses(b, R));
            for (size_t i = 0; i + 1 < run.size(); i++) CHECK(std::fabs(run[i] - base[i]) < 1e-4);
        }
    }
}

TEST_CASE("auto: the faster backend on the recorded products, remembered per machine as taken; a given backend "
          "untimed", "[matmul]") {
    GPTConfig c = preset("course");
    c.n_layer = 1, c.block_size = 16, c.vocab_size = 30;
    TrainConfig tc;
    tc.batch_size = 4;
    const std::vector<int> ids = random_ids(c.vocab_size, 2000);
    const int threads = omp_get_max_threads();
    int recorded = 0;
    const auto calls = [&] {
        recorded++;
        return training_step_matmuls(c, tc, ids);
    };
    const std::string key = training_matmul_key(c, tc, threads);
    CHECK(key.find("threads " + std::to_string(threads)) != std::string::npos);
    CHECK(key.find(machine_signature()) != std::string::npos);

    const MatmulChoice given = choose_matmul("openblas", key, calls, threads);
    CHECK(given.backend == MatmulBackend::OpenBLAS);
    CHECK(given.why == "as --matmul says");
    CHECK(recorded == 0);
    CHECK_THROWS_AS(choose_matmul("blas", key, calls, threads), Error);

    TempDir tmp("handgrad-matmul-cache");
    CacheDir cache(tmp.path.string());
    const MatmulChoice first = choose_matmul("auto", key, calls, threads);
    INFO(first.why);
    CHECK(recorded == 1);
    REQUIRE(first.ms.size() == matmul_backends().size());
    for (double ms : first.ms) CHECK(ms > 0);
    const size_t fastest = std::min_element(first.ms.begin(), first.ms.end()) - first.ms.begin();
    CHECK(first.backend == matmul_backends()[fastest]);
    CHECK(first.seconds > 0);
    CHECK(first.why.find("auto: the products take") != std::string::npos);

    // Every answer is remembered, a close one too, and taken as it was recorded.
    const MatmulChoice again = choose_matmul("auto", key, calls, threads);
    CHECK(recorded == 1);  // not measured again
    CHECK(again.backend == first.backend);
    CHECK(again.seconds == 0);
    CHECK(again.why.find("remembered") != std::string::npos);
    // Another key (here: another thread count) is measured afresh.
    choose_matmul("auto", training_matmul_key(c, tc, threads + 1), calls, threads);
    CHECK(recorded == 2);
    // A cache line that makes no sense is measured again, not trusted; a line whose times
    // favour another backend still gives the backend it names (the times are rounded in the
    // file: a re-decision from them could flip a tie).
    std::string options;
    for (MatmulBackend b : matmul_backends()) options += " " + to_string(b);
    const std::string line_key = key + " | options" + options;
    cache_put(line_key, "cuda 1 2");
    choose_matmul("auto", key, calls, threads);
    CHECK(recorded == 3);
    std::string slower_named = to_string(matmul_backends().back());
    for (size_t i = 0; i < matmul_backends().size(); i++)
        slower_named += i + 1 == matmul_backends().size() ? " 9" : " 1";
    cache_put(line_key, slower_named);
    CHECK(choose_matmul("auto", key, calls, threads).backend == matmul_backends().back());
    CHECK(recorded == 3);
    // A line from a build with one backend fewer (two times) is measured again and replaced.
    cache_put(line_key, "openblas 1.5 4.5");
    const MatmulChoice older = choose_matmul("auto", key, calls, threads);
    CHECK(recorded == 4);
    CHECK(older.ms.size() == matmul_backends().size());
    const std::string line = cache_get(line_key).value_or("");
    CHECK(std::count(line.begin(), line.end(), ' ') == int(matmul_backends().size()));
}

TEST_CASE("timing products: one time per backend asked for, and the backend in use left as it was, an exception "
          "included", "[matmul]") {
    MatmulCall big, small;
    big.form = MatmulForm::NT, big.M = 96, big.N = 64, big.K = 128;
    big.lda = 128, big.ldb = 128, big.ldc = 64, big.count = 3;
    small = big, small.M = 8, small.count = 1;
    const std::vector<MatmulBackend> all = matmul_backends();
    REQUIRE(all.size() >= 2);  // OpenBLAS and our Highway kernel are always built
    const UseBackend first(all.front());
    const std::vector<double> ms = time_matmul_calls({big, small}, all, 1);
    REQUIRE(ms.size() == all.size());
    for (double t : ms) CHECK(t > 0);
    CHECK(matmul_current() == all.front());
    CHECK(time_matmul_calls({small}, {all.back()}, 1).size() == 1);
    CHECK(matmul_current() == all.front());
    // An error in the middle of timing, while another backend is in use: put back all the same.
    int runs = 0;
    CHECK_THROWS_WITH(time_with_backends(all, [&] {
        runs++;
        if (matmul_current() == all.back()) throw Error("planted");
        return 1e-3;
    }), "planted");
    CHECK(runs == int(all.size()));
    CHECK(matmul_current() == all.front());
}

TEST_CASE("a run held up by the machine does not decide a backend's time: runs go on until two agree",
          "[matmul]") {
    // Runs of 3 ms, so the 2 ms a backend are over after one turn; the second backend's first
    // timed run is held up (5 ms reported), its next two agree within 25 %.
    const std::vector<MatmulBackend> all = matmul_backends();
    REQUIRE(all.size() >= 2);
    const std::vector<MatmulBackend> two{all[0], all[1]};
    std::vector<double> script{1.0, 5e-3, 1.00e-3, 1.2e-3, 1.0e-3, 1.0e-3, 1.0e-3};
    size_t runs_second = 0, runs = 0;
    const std::vector<double> best = time_with_backends(two, [&] {
        runs++;
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
        if (matmul_current() != two[1]) return 2e-3;
        return script[std::min(runs_second++, script.size() - 1)];
    });
    CHECK(best[0] == 2e-3);
    CHECK(best[1] == 1e-3);
    CHECK(runs_second == 4);  // the first run, then three turns: 5 ms, 1 ms, 1.2 ms
    CHECK(runs == 8);
}

TEST_CASE("a long product is timed cut short in each dimension, and scaled back up", "[matmul]") {
    // The baby GPT's c_attn forward, its weight gradient, GPT-2 small's lm_head, attention's q·kᵀ.
    const MatmulCall fwd{MatmulForm::NT, 16384, 1152, 384, 384, 384, 1152, 0.0f, 1, 6};
    const MatmulCall dW{MatmulForm::TN, 1152, 384, 16384, 1152, 384, 384, 1.0f, 1, 6};
    const MatmulCall head{MatmulForm::NT, 256, 50257, 768, 768, 768, 50257, 0.0f, 1, 1};
    const MatmulCall qk{MatmulForm::NT, 256, 256, 64, 1152, 1152, 256, 0.0f, 2, 384};
    const MatmulCall replica_fwd{MatmulForm::NT, 8192, 1152, 384, 384, 384, 1152, 0.0f, 2, 12};
    for (int threads : {1, 2, 16, 64, 128})
        for (const MatmulCall& m : {fwd, dW, head, qk, replica_fwd}) {
            INFO(threads << " threads, " << to_string(m.form) << " " << m.M << " " << m.N << " " << m.K);
            double scale = 0;
            const MatmulCall s = shortened_call(m, threads, &scale);
            // The same call but for its sizes and strides: form, beta and team kept.
            CHECK((s.form == m.form && s.beta == m.beta && s.team == m.team));
            // Its operands tight: each leading dimension the width of its own operand.
            CHECK(s.lda == (s.form == MatmulForm::TN ? s.M : s.K));
            CHECK(s.ldb == (s.form == MatmulForm::NT ? s.K : s.N));
            CHECK(s.ldc == s.N);
            // Its time scaled up is the whole call's work, none lost to rounding.
            CHECK(scale * double(s.M) * s.N * s.K == Approx(double(m.M) * m.N * m.K));
            CHECK(scale >= 1);
            // Rows and columns cut to 512 inside a parallel region, to 512·⌈√threads⌉ outside,
            // terms to 512; never below.
            const int cut = m.nested() ? 512 : 512 * int(std::ceil(std::sqrt(double(threads))));
            CHECK(shortened_size(m, threads) == cut);
            CHECK((s.M == std::min(m.M, cut) && s.N == std::min(m.N, cut) && s.K == std::min(m.K, kShortenedTerms)));
        }
    double scale = 0;
    const MatmulCall f = shortened_call(fwd, 2, &scale);  // 2 threads: 1024
    CHECK((f.M == 1024 && f.N == 1024 && f.K == fwd.K));
    CHECK(scale == Approx(16384.0 / 1024 * fwd.N / 1024));
    const MatmulCall g = shortened_call(dW, 2, &scale);  // 16,384 terms cut to 512
    CHECK((g.M == 1024 && g.N == dW.N && g.K == 512));
    CHECK(scale == Approx(1152.0 / 1024 * 16384 / 512));
    CHECK(shortened_call(qk, 128, &scale).M == 256);  // nothing to cut
    CHECK(scale == 1);
    CHECK(shortened_call(replica_fwd, 2, &scale).M == 512);
    CHECK(scale == Approx(8192.0 / 512 * 1152 / 512));  // N cut too
}

TEST_CASE("calls that differ only past the cut, or in their strides, are timed once: their times are in the "
          "ratio of their work", "[matmul]") {
    MatmulCall dW{MatmulForm::TN, 64, 48, 2048, 64, 48, 48, 1.0f, 1, 1};
    MatmulCall longer = dW, strided = dW;
    longer.K = 6144, longer.count = 2;     // 3x the terms, twice: 6x the time
    strided.lda = 100, strided.ldb = 50;   // the same work on wider buffers
    const std::vector<MatmulBackend> all = matmul_backends();
    const std::vector<std::vector<double>> ms = time_matmul_call_sets({{dW}, {longer}, {strided}}, all, 1);
    for (size_t b = 0; b < all.size(); b++) {
        INFO(to_string(all[b]));
        CHECK(ms[0][b] > 0);
        CHECK(ms[1][b] == Approx(6 * ms[0][b]));
        CHECK(ms[2][b] == Approx(ms[0][b]));
    }
}

TEST_CASE("calls are timed largest first, and a backend far behind on a quarter of the work is timed no further",
          "[matmul]") {
    // Five calls of one set, their work 10, 40, 20, 20, 10 (each run once, so a call's work is
    // its seconds on backend 0 too). Backend 1 takes 1.5x backend 0's time, backend 2 3x.
    const std::vector<double> work{10, 40, 20, 20, 10};
    std::vector<std::vector<double>> uses(work.size(), std::vector<double>{1.0});
    const std::vector<double> slower{1.0, 1.5, 3.0};
    std::vector<size_t> order;
    std::vector<std::vector<size_t>> asked;
    const auto time = [&](const std::vector<double>& factor) {
        return [&, factor](size_t i, const std::vector<size_t>& live) {
            order.push_back(i), asked.push_back(live);
            std::vector<double> s(factor.size(), -1.0);  // what is not asked for must not count
            for (size_t b : live) s[b] = work[i] * factor[b];
            return s;
        };
    };
    std::vector<std::vector<double>> ms = add_up_call_times(1, uses, work, 3, time(slower));
    CHECK(order == std::vector<size_t>{1, 2, 3, 0, 4});  // largest first, the first of equals first
    // The first call is 40 % of the work: backend 2, 3x behind, is not asked again; backend 1 is.
    CHECK(asked[0] == std::vector<size_t>{0, 1, 2});
    for (size_t j = 1; j < asked.size(); j++) CHECK(asked[j] == std::vector<size_t>{0, 1});
    CHECK(ms[0][0] == Approx(1000 * 100.0));
    CHECK(ms[0][1] == Approx(1000 * 150.0));
    CHECK(ms[0][2] == Approx(1000 * 300.0));  // the rest at its ratio so far, 3x the fastest

    // Less than a quarter timed: nothing is dropped yet. Five calls of 20: after the first, 20 %
    // of the work is timed and backend 2 is asked again; after the second, 40 %, and it is not.
    asked.clear();
    const std::vector<double> even(5, 20.0);
    ms = add_up_call_times(1, uses, even, 3, [&](size_t, const std::vector<size_t>& live) {
        asked.push_back(live);
        std::vector<double> s(3, 0.0);
        for (size_t b : live) s[b] = slower[b];
        return s;
    });
    REQUIRE(asked.size() == 5);
    CHECK(asked[1].size() == 3);
    CHECK(asked[2].size() == 2);
    CHECK(ms[0][2] == Approx(1000 * 15.0));

    // Behind by less than kFarBehind: every backend timed on every call.
    order.clear(), asked.clear();
    ms = add_up_call_times(1, uses, work, 3, time({1.0, 1.5, 0.99 * kFarBehind}));
    for (const std::vector<size_t>& live : asked) CHECK(live.size() == 3);
    CHECK(ms[0][2] == Approx(1000 * 100.0 * 0.99 * kFarBehind));

    // Far behind on one set, and the other set not timed yet: kept; then faster there, kept.
    // Set 0 runs calls 0 and 1, set 1 call 2; backend 1 is 3x slower on calls 0 and 1 and
    // twice as fast on call 2. A set with no calls (set 2) says nothing either way.
    asked.clear();
    ms = add_up_call_times(3, {{1.0, 0.0, 0.0}, {1.0, 0.0, 0.0}, {0.0, 1.0, 0.0}}, {50, 30, 20}, 2,
                           [&](size_t i, const std::vector<size_t>& live) {
                               asked.push_back(live);
                               return i == 2 ? std::vector<double>{2.0, 1.0} : std::vector<double>{1.0, 3.0};
                           });
    for (const std::vector<size_t>& live : asked) CHECK(live.size() == 2);
    CHECK(ms[1][1] == Approx(1000 * 1.0));
    CHECK((ms.size() == 3 && ms[2][0] == 0 && ms[2][1] == 0));
    // No calls at all: every set is there, at zero.
    CHECK(add_up_call_times(2, {}, {}, 3, time(slower)) == std::vector<std::vector<double>>(2, std::vector<double>(3, 0.0)));
}

TEST_CASE("the remembered choice's key changes with everything the times depend on", "[matmul][batch_threads]") {
    GPTConfig c = preset("course");
    TrainConfig tc;
    tc.batch_size = 8, tc.batch_threads = 2;
    const int threads = 2;
    using Keyer = std::function<std::string(const GPTConfig&, const TrainConfig&, int)>;
    for (const Keyer& key : {Keyer(training_matmul_key), Keyer(step_choice_key)}) {
        const std::string base = key(c, tc, threads);
        CHECK(base.find(machine_signature()) != std::string::npos);
        const auto differs = [&](const std::string& what, const GPTConfig& c2, const TrainConfig& t2, int th) {
            INFO(what);
            CHECK(key(c2, t2, th) != base);
        };
        differs("threads", c, tc, threads + 1);
        TrainConfig t = tc;
        t.dtype = DType::BFloat16;
        differs("dtype", c, t, threads);
        t = tc, t.optimizer = OptimizerKind::Muon;
        differs("optimizer", c, t, threads);
        t = tc, t.batch_size = 16;
        differs("batch_size", c, t, threads);
        GPTConfig s = c;
        s.vocab_size += 1;
        differs("vocab_size", s, tc, threads);
        s = c, s.block_size /= 2;
        differs("block_size", s, tc, threads);
        s = c, s.n_embd *= 2;
        differs("n_embd", s, tc, threads);
        s = c, s.n_head *= 2;
        differs("n_head", s, tc, threads);
        s = c, s.n_layer += 1;
        differs("n_layer", s, tc, threads);
        s = c, s.mlp = MlpKind::SwiGLU;
        differs("mlp", s, tc, threads);
        s = c, s.tie_weights = !c.tie_weights;
        differs("tie_weights", s, tc, threads);
    }
    // The matmul key is for one batch threads setting; the joint choice has them among its options.
    TrainConfig t = tc;
    t.batch_threads = 1;
    CHECK(training_matmul_key(c, t, threads) != training_matmul_key(c, tc, threads));
    CHECK(step_choice_key(c, t, threads) == step_choice_key(c, tc, threads));
    // Under bf16 the matmul key is for one way of the bf16 products; the joint choice has them among its options.
    t = tc, t.dtype = DType::BFloat16;
    matmul_bf16_force_widen(true);
    const std::string widened = training_matmul_key(c, t, threads), widened_step = step_choice_key(c, t, threads);
    matmul_bf16_force_widen(false);
    CHECK(widened.find("bf16 widen") != std::string::npos);
    if (matmul_bf16_backends().size() == 2) CHECK(training_matmul_key(c, t, threads) != widened);
    CHECK(step_choice_key(c, t, threads) == widened_step);
    // A forward pass's key: its rows, its length and the threads.
    const std::string fwd = forward_matmul_key(c, 1, 64, threads);
    CHECK(forward_matmul_key(c, 2, 64, threads) != fwd);
    CHECK(forward_matmul_key(c, 1, 32, threads) != fwd);
    CHECK(forward_matmul_key(c, 1, 64, threads + 1) != fwd);
}

TEST_CASE("a remembered choice reads back as written; a value of another shape is no answer",
          "[matmul][batch_threads]") {
    const RememberedChoice c{"onednn", {7.6, 14.9, 9.25}};
    const std::optional<RememberedChoice> back = decode_choice(encode_choice(c), 3);
    REQUIRE(back);
    CHECK(back->taken == "onednn");
    CHECK(back->ms == c.ms);
    CHECK(decode_choice("2 3040.125 3320.7", 2)->ms[0] == 3040.125);  // the old batch_threads lines read too
    CHECK_FALSE(decode_choice(encode_choice(c), 2));  // a build with other options wrote it
    CHECK_FALSE(decode_choice("onednn 7.6 14.9", 3));
    CHECK_FALSE(decode_choice("", 0));
    CHECK_FALSE(decode_choice("onednn 7.6 x", 2));
    CHECK_FALSE(decode_choice("onednn 7.6 14.9 junk", 2));
}

TEST_CASE("the machine's peak: positive, and not below the order of the measured product rate", "[matmul][peak]") {
    const int threads = omp_get_max_threads();
    const double peak = peak_f32_gflops(threads, 0.05);
    CHECK(peak > 0);
    const int n = 384;
    std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        const auto t0 = std::chrono::steady_clock::now();
        matmul_nt({c.data(), n, n, n}, {a.data(), n, n, n}, {b.data(), n, n, n}, 1.0f, 0.0f);
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    CHECK(c[7] == Approx(0.125f * n));
    const double sgemm = 2.0 * n * n * n / best / 1e9;
    INFO("peak " << peak << " GFLOP/s, sgemm " << sgemm << " GFLOP/s");
#ifndef __SANITIZE_ADDRESS__  // make asan builds the loop at -O1 with checks on every vector; the BLAS stays fast
    CHECK(peak >= 0.1 * sgemm);
#endif
    if (cpu_has_bf16_dot()) CHECK(peak_bf16_gflops(threads, 0.05) > 0);
    else CHECK(peak_bf16_gflops(threads, 0.05) == 0);
}

TEST_CASE("train --matmul: the header says which backend ran and why", "[matmul][apps]") {
    TempDir tmp("handgrad-matmul-app");
    const std::string data = write_file(tmp.path / "data.txt", corpus());
    const std::string base = bin("train") + kTiny + " --max_iters=2 --eval_interval=2 --data=" + data;
    for (MatmulBackend b : matmul_backends()) {
        const Run r = run(base + " --matmul=" + to_string(b) + " --out_dir=" + (tmp.path / to_string(b)).string());
        INFO(r.output);
        CHECK(r.status == 0);
        CHECK(r.output.find("matmul: " + to_string(b) + " (as --matmul says)") != std::string::npos);
    }
    const Run a = run(base + " --matmul=auto --out_dir=" + (tmp.path / "auto").string());
    INFO(a.output);
    CHECK(a.status == 0);
    const std::string why = matmul_backends().size() > 1 ? "(auto: a step's products, forward and backward: ~"
                                                         : "(auto: the only backend";
    CHECK(a.output.find(why) != std::string::npos);
}

TEST_CASE("a resumed run with auto keeps the backend its checkpoint records", "[matmul][resume]") {
    CHECK(recorded_matmul(R"({"batch_size": 4, "matmul": "openblas"})") == MatmulBackend::OpenBLAS);
    if (matmul_available(MatmulBackend::OneDNN))
        CHECK(recorded_matmul(R"({"matmul": "onednn"})") == MatmulBackend::OneDNN);
    // Nothing recorded, or nothing usable: auto decides afresh.
    for (const char* none : {"{}", R"({"matmul": "cuda"})", R"({"matmul": 3})", "not json", ""})
        CHECK_FALSE(recorded_matmul(none).has_value());
    int recorded = 0;
    const auto calls = [&] { return recorded++, std::vector<MatmulCall>{}; };
    const MatmulChoice kept = choose_matmul("auto", "k", calls, 1, Dist{}, MatmulBackend::OpenBLAS);
    CHECK(kept.backend == MatmulBackend::OpenBLAS);
    CHECK(kept.why == "auto: as the checkpoint was trained");
    CHECK(recorded == 0);
    // An explicit --matmul wins over the record.
    CHECK(choose_matmul("openblas", "k", calls, 1, Dist{}, matmul_backends().back()).why == "as --matmul says");

    TempDir tmp("handgrad-matmul-resume");
    const std::string data = write_file(tmp.path / "data.txt", corpus());
    const std::string common = bin("train") + kTiny + " --eval_interval=2 --data=" + data + " --out_dir=" +
                               (tmp.path / "o").string();
    const std::string name = to_string(matmul_backends().back());
    REQUIRE(run(common + " --max_iters=2 --matmul=" + name).status == 0);
    const Run resumed = run(common + " --max_iters=4 --init_from=resume --matmul=auto");
    INFO(resumed.output);
    CHECK(resumed.status == 0);
    CHECK(resumed.output.find("matmul: " + name + " (auto: as the checkpoint was trained)") != std::string::npos);
}

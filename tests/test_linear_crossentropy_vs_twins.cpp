// test_linear_crossentropy_vs_twins.cpp — the float fast path of linear (sgemm) and of
// cross-entropy (a Highway row kernel) against their double scalar twins, with the float
// tolerance documented at each check; cross-entropy at logits of magnitude 1e4; and, with
// attention, results that do not depend on the thread count. Their gradient checks are in
// test_gradcheck_layers.cpp; the other layers' fast paths are in test_kernels_vs_twins.cpp
// and test_attention.cpp.
#include "tests/catch.h"
#include <algorithm>
#include <cmath>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "lib/layers/attention.h"
#include "lib/layers/crossentropy.h"
#include "lib/layers/linear.h"
#include "tests/gradcheck.h"

using hg::Dropout;
using hg::test::all_finite;
using hg::test::ce_targets;
using hg::test::randn;
using hg::test::to_double;
using hg::test::worst_ratio;

TEST_CASE("linear fast float path matches the double scalar twin", "[linear]") {
    // Float tolerance: sums of C = 70 products of N(0,1) numbers, each entry within
    // 1e-5 + 1e-5·|ref| (measured worst: 25% of that, on out).
    const double tol = 1e-5;
    for (bool with_bias : {true, false}) {
        const int N = 37, C = 70, OC = 45;
        auto inp = randn<float>((size_t)N * C, 21), weight = randn<float>((size_t)OC * C, 22);
        auto bias = randn<float>(OC, 23), dout = randn<float>((size_t)N * OC, 24);
        auto inp_d = to_double(inp), weight_d = to_double(weight), bias_d = to_double(bias),
             dout_d = to_double(dout);
        // Gradients start non-zero: dweight, dbias must be added to and dinp overwritten.
        auto dinp = randn<float>(inp.size(), 25), dweight = randn<float>(weight.size(), 26),
             dbias = randn<float>(bias.size(), 27);
        auto dinp_d = to_double(dinp), dweight_d = to_double(dweight), dbias_d = to_double(dbias);
        std::vector<float> out((size_t)N * OC, 99.0f);
        std::vector<double> out_d((size_t)N * OC);

        hg::linear_forward(out.data(), inp.data(), weight.data(), with_bias ? bias.data() : nullptr,
                           N, C, OC);
        hg::linear_forward_twin(out_d.data(), inp_d.data(), weight_d.data(),
                                with_bias ? bias_d.data() : nullptr, N, C, OC);
        hg::linear_backward(dinp.data(), dweight.data(), with_bias ? dbias.data() : nullptr,
                            dout.data(), inp.data(), weight.data(), N, C, OC);
        hg::linear_backward_twin(dinp_d.data(), dweight_d.data(),
                                 with_bias ? dbias_d.data() : nullptr, dout_d.data(),
                                 inp_d.data(), weight_d.data(), N, C, OC);
        INFO("bias=" << with_bias);
        CHECK(worst_ratio(out.data(), out_d.data(), out.size(), tol, tol) <= 1.0);
        CHECK(worst_ratio(dinp.data(), dinp_d.data(), dinp.size(), tol, tol) <= 1.0);
        CHECK(worst_ratio(dweight.data(), dweight_d.data(), dweight.size(), tol, tol) <= 1.0);
        CHECK(worst_ratio(dbias.data(), dbias_d.data(), dbias.size(), tol, tol) <= 1.0);
    }
    SECTION("dinp = null skips the input gradient") {
        const int N = 4, C = 3, OC = 2;
        auto inp = randn<float>(N * C, 1), weight = randn<float>(OC * C, 2),
             dout = randn<float>(N * OC, 3);
        std::vector<float> dweight(OC * C), dweight_ref(OC * C);
        std::vector<double> dw_d(OC * C), dinp_d(N * C);
        hg::linear_backward(nullptr, dweight.data(), nullptr, dout.data(), inp.data(),
                            weight.data(), N, C, OC);
        auto inp_d = to_double(inp), weight_d = to_double(weight), dout_d = to_double(dout);
        hg::linear_backward_twin<double>(nullptr, dw_d.data(), nullptr, dout_d.data(),
                                         inp_d.data(), weight_d.data(), N, C, OC);
        CHECK(worst_ratio(dweight.data(), dw_d.data(), dweight.size(), 1e-6, 1e-6) <= 1.0);
    }
}

#ifdef _OPENMP
TEST_CASE("results do not depend on the thread count (1 vs 2 threads)",
          "[linear][attention][crossentropy]") {
    // Sizes above the parallel thresholds (N·V and N·OC > 2^18), so 2 threads really split.
    // Exception: OpenBLAS's own multi-threaded sgemm (linear's three products) changes the
    // last bits of some entries between 1 and 2 threads (measured: ~4% of out, up to 5.7e-6
    // on values ~10), so those are compared within a float tolerance across thread counts and
    // bit for bit between two runs with the same count. Everything handgrad reduces itself (attention
    // per head, cross-entropy, linear's dbias) must be bit-identical.
    const int B = 2, T = 66, C = 16, NH = 2, V = 300, N = 1000, LC = 32, OC = 500;
    const Dropout drop{0.1f, 0x5eed};
    auto qkv = randn<float>((size_t)B * T * 3 * C, 81), dout = randn<float>((size_t)B * T * C, 82);
    auto logits = randn<float>((size_t)N * V, 83, 3.0);
    auto inp = randn<float>((size_t)N * LC, 84), weight = randn<float>((size_t)OC * LC, 85);
    auto bias = randn<float>(OC, 86), dlin = randn<float>((size_t)N * OC, 87);
    std::vector<int> targets(N);
    for (int n = 0; n < N; n++) targets[n] = n % 7 == 0 ? -1 : (n * 37) % V;
    struct Run {
        std::vector<float> out, dqkv, probs, losses, dlogits, lin, dinp, dweight, dbias;
        double loss;
    };
    auto run = [&](int threads) {
        const int saved = omp_get_max_threads();
        omp_set_num_threads(threads);
        Run r;
        r.out.resize(dout.size());
        std::vector<float> att((size_t)B * NH * T * T), fwd_scratch(att.size()), scratch(att.size());
        r.dqkv.assign(qkv.size(), 0.0f);
        hg::attention_forward(r.out.data(), att.data(), fwd_scratch.data(), qkv.data(), B, T, C, NH, drop);
        hg::attention_backward(r.dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(),
                               B, T, C, NH, drop);
        r.probs.resize(logits.size());
        r.losses.resize(N);
        r.dlogits.assign(logits.size(), 0.0f);
        r.loss = hg::crossentropy_forward(r.probs.data(), r.losses.data(), logits.data(),
                                          targets.data(), N, V);
        hg::crossentropy_backward(r.dlogits.data(), r.probs.data(), targets.data(), N, V, 1.0f);
        r.lin.resize(dlin.size());
        r.dinp.assign(inp.size(), 0.0f);
        r.dweight.assign(weight.size(), 0.0f);
        r.dbias.assign(bias.size(), 0.0f);
        hg::linear_forward(r.lin.data(), inp.data(), weight.data(), bias.data(), N, LC, OC);
        hg::linear_backward(r.dinp.data(), r.dweight.data(), r.dbias.data(), dlin.data(),
                            inp.data(), weight.data(), N, LC, OC);
        omp_set_num_threads(saved);
        return r;
    };
    Run one = run(1), two = run(2), again = run(2);
    CHECK(one.out == two.out);
    CHECK(one.dqkv == two.dqkv);
    CHECK(one.probs == two.probs);
    CHECK(one.dlogits == two.dlogits);
    CHECK(one.loss == two.loss);
    CHECK(one.dbias == two.dbias);
    // A sum of K products of N(0,1) numbers is ~√K in size: atol 1e-5·√K, rtol 1e-5.
    auto close = [](const std::vector<float>& a, const std::vector<float>& b, int K) {
        return worst_ratio(a.data(), b.data(), a.size(), 1e-5 * std::sqrt(double(K)), 1e-5);
    };
    CHECK(close(one.lin, two.lin, LC) <= 1.0);
    CHECK(close(one.dinp, two.dinp, OC) <= 1.0);
    CHECK(close(one.dweight, two.dweight, N) <= 1.0);
    CHECK(two.lin == again.lin);
    CHECK(two.dinp == again.dinp);
    CHECK(two.dweight == again.dweight);
}
#endif

TEST_CASE("cross-entropy fast float path matches the double scalar twin", "[crossentropy]") {
    // Float tolerance: probs and dlogits within 1e-6 + 1e-5·|ref|, losses within 1e-5·(1+|ref|),
    // the mean loss within 1e-6 relative (V = 1000, logits N(0, 3²); measured worst: 2% of
    // the tolerance).
    const int N = 33, V = 1000;
    auto logits = randn<float>((size_t)N * V, 111, 3.0);
    auto targets = ce_targets(N, V, 112);
    targets[7] = -1;
    auto logits_d = to_double(logits);
    std::vector<float> probs(logits.size()), losses(N);
    std::vector<double> probs_d(logits.size()), losses_d(N);
    auto dlogits = randn<float>(logits.size(), 113, 1e-3);  // non-zero: the backward overwrites
    auto dlogits_d = to_double(dlogits);
    double loss =
        hg::crossentropy_forward(probs.data(), losses.data(), logits.data(), targets.data(), N, V);
    double loss_d = hg::crossentropy_forward_twin(probs_d.data(), losses_d.data(),
                                                  logits_d.data(), targets.data(), N, V);
    hg::crossentropy_backward(dlogits.data(), probs.data(), targets.data(), N, V, 0.37f);
    hg::crossentropy_backward_twin(dlogits_d.data(), probs_d.data(), targets.data(), N, V, 0.37);
    CHECK(loss == Approx(loss_d).epsilon(1e-6));
    CHECK(losses[7] == 0.0f);
    CHECK(worst_ratio(losses.data(), losses_d.data(), losses.size(), 1e-5, 1e-5) <= 1.0);
    CHECK(worst_ratio(probs.data(), probs_d.data(), probs.size(), 1e-6, 1e-5) <= 1.0);
    CHECK(worst_ratio(dlogits.data(), dlogits_d.data(), dlogits.size(), 1e-6, 1e-5) <= 1.0);
    // the ignored row's gradient is written as 0
    CHECK(std::all_of(dlogits.begin() + 7 * V, dlogits.begin() + 8 * V, [](float g) { return g == 0.0f; }));
    // every target ignored: loss 0, no gradient
    std::vector<int> none(N, -1);
    CHECK(hg::crossentropy_forward(probs.data(), losses.data(), logits.data(), none.data(), N, V) ==
          0.0);
}

TEST_CASE("cross-entropy's backward written over probs equals the one written beside them", "[crossentropy]") {
    // The model gives the backward probs as its dlogits (gpt.h): each row is read before it is written.
    const int N = 9, V = 300;
    const auto logits = randn<float>((size_t)N * V, 121, 3.0);
    auto targets = ce_targets(N, V, 122);
    targets[4] = -1;
    std::vector<float> probs(logits.size()), losses(N), beside(logits.size());
    hg::crossentropy_forward(probs.data(), losses.data(), logits.data(), targets.data(), N, V);
    hg::crossentropy_backward(beside.data(), probs.data(), targets.data(), N, V, 0.5f);
    std::vector<float> over = probs;
    hg::crossentropy_backward(over.data(), over.data(), targets.data(), N, V, 0.5f);
    CHECK(over == beside);
    std::vector<double> probs_d = to_double(probs), beside_d(probs_d.size());
    hg::crossentropy_backward_twin(beside_d.data(), probs_d.data(), targets.data(), N, V, 0.5);
    hg::crossentropy_backward_twin(probs_d.data(), probs_d.data(), targets.data(), N, V, 0.5);
    CHECK(probs_d == beside_d);
}

TEST_CASE("cross-entropy with logits of magnitude 1e4 gives finite loss and probs",
          "[crossentropy]") {
    const int N = 8, V = 65;
    auto logits = randn<float>((size_t)N * V, 121, 1e4);
    std::vector<int> targets(N);
    for (int n = 0; n < N; n++) {  // the least likely class: p underflows to 0 in float
        int arg = 0;
        for (int i = 1; i < V; i++)
            if (logits[(size_t)n * V + i] < logits[(size_t)n * V + arg]) arg = i;
        targets[n] = arg;
    }
    std::vector<float> probs(logits.size()), losses(N), dlogits(logits.size());
    auto logits_d = to_double(logits);
    std::vector<double> probs_d(logits.size()), losses_d(N);
    double loss =
        hg::crossentropy_forward(probs.data(), losses.data(), logits.data(), targets.data(), N, V);
    double loss_d = hg::crossentropy_forward_twin(probs_d.data(), losses_d.data(),
                                                  logits_d.data(), targets.data(), N, V);
    hg::crossentropy_backward(dlogits.data(), probs.data(), targets.data(), N, V, 1.0f);
    CHECK(std::isfinite(loss));
    CHECK(loss > 1e3);  // -log p of the least likely class, p ~ exp(-(max - min))
    CHECK(loss == Approx(loss_d).epsilon(1e-6));
    CHECK(all_finite(probs.data(), probs.size()));
    CHECK(all_finite(losses.data(), losses.size()));
    CHECK(all_finite(dlogits.data(), dlogits.size()));
    for (int n = 0; n < N; n++) {
        double sum = 0;
        for (int i = 0; i < V; i++) sum += probs[(size_t)n * V + i];
        CHECK(sum == Approx(1.0).epsilon(1e-6));
    }
}

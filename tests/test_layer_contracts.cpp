// test_layer_contracts.cpp — what the layers promise besides their derivatives: which
// gradients each fast backward adds to (+=) and which it writes (=), the rule lib/layers/layers.h
// states; bad arguments are an hg::Error naming the bad value; dropout's mask (p = 0 is the
// identity, about p of the entries dropped, the same mask in both passes, in place too); and the
// sinusoidal position table against values worked out by hand.
#include "tests/catch.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "lib/core/errors.h"
#include "lib/layers/attention.h"
#include "lib/layers/crossentropy.h"
#include "lib/layers/dropout.h"
#include "lib/layers/encoder.h"
#include "lib/layers/gelu.h"
#include "lib/layers/layernorm.h"
#include "lib/layers/linear.h"
#include "lib/layers/residual.h"
#include "tests/gradcheck.h"
#include "tests/layer_checks.h"

using namespace hg;
using hg::test::check_writes_and_adds;
using hg::test::mismatches;
using hg::test::randn;

// ---- What each backward adds to and what it writes ---------------------------------------

TEST_CASE("Every fast backward adds into parameter gradients and writes input gradients",
          "[encoder][layernorm][gelu][dropout][linear][attention][crossentropy]") {
    const int B = 2, T = 3, C = 37, V = 5, N = B * T;
    const size_t n = size_t(N) * C;
    auto f = [](size_t k, uint64_t seed) { return randn<float>(k, seed); };
    auto x = f(n, 1), dout = f(n, 2), w = f(C, 3), bias = f(C, 4);
    std::vector<float> out(n), mean(N), rstd(N);
    layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), bias.data(), N, C);
    check_writes_and_adds("layernorm", {f(n, 5), f(C, 6), f(C, 7)}, {true, true, true},
                          [&](auto& g) {
        layernorm_backward(g[0].data(), g[1].data(), g[2].data(), dout.data(), x.data(), w.data(),
                           mean.data(), rstd.data(), N, C);
    });
    const std::vector<int> idx = {4, 0, 4, 4, 1, 0};
    check_writes_and_adds("encoder", {f(size_t(V) * C, 12), f(size_t(T) * C, 13)}, {true, true},
                          [&](auto& g) {
        encoder_backward(g[0].data(), g[1].data(), dout.data(), idx.data(), B, T, C);
    });
    for (GeluKind kind : {GeluKind::Erf, GeluKind::Tanh})
        check_writes_and_adds("gelu", {f(n, 8)}, {false}, [&](auto& g) {
            gelu_backward(g[0].data(), x.data(), dout.data(), n, kind);
        });
    for (float p : {0.0f, 0.3f})
        check_writes_and_adds("dropout", {f(n, 11)}, {false}, [&](auto& g) {
            dropout_backward(g[0].data(), dout.data(), n, Dropout{p, 5});
        });
    const int OC = 11;
    auto w_lin = f(size_t(OC) * C, 14), dout_lin = f(size_t(N) * OC, 15);
    check_writes_and_adds("linear", {f(n, 16), f(size_t(OC) * C, 17), f(OC, 18)},
                          {false, true, true}, [&](auto& g) {
        linear_backward(g[0].data(), g[1].data(), g[2].data(), dout_lin.data(), x.data(),
                        w_lin.data(), N, C, OC);
    });
    // attention over T = 70 (two row blocks of the fast path: dk, dv are written by one and
    // added to by the other), with and without dropout
    const int Ta = 70, Ca = 8, NH = 2;
    auto qkv = f(size_t(B) * Ta * 3 * Ca, 19), dout_att = f(size_t(B) * Ta * Ca, 20);
    std::vector<float> att_out(dout_att.size()), att(size_t(B) * NH * Ta * Ta), scratch(att.size());
    for (float p : {0.0f, 0.3f}) {
        attention_forward(att_out.data(), att.data(), scratch.data(), qkv.data(), B, Ta, Ca, NH, Dropout{p, 7});
        check_writes_and_adds("attention", {f(qkv.size(), 21)}, {false}, [&](auto& g) {
            attention_backward(g[0].data(), scratch.data(), dout_att.data(), qkv.data(), att.data(), B,
                               Ta, Ca, NH, Dropout{p, 7});
        });
    }
    // cross-entropy, one row ignored (target -1): its gradient is written as 0
    auto logits = f(size_t(N) * V, 22);
    std::vector<float> probs(logits.size()), losses(N);
    const std::vector<int> targets = {1, -1, 4, 0, 2, 2};
    crossentropy_forward(probs.data(), losses.data(), logits.data(), targets.data(), N, V);
    check_writes_and_adds("crossentropy", {f(logits.size(), 23)}, {false}, [&](auto& g) {
        crossentropy_backward(g[0].data(), probs.data(), targets.data(), N, V, 1.0f);
    });
}

// ---- Bad arguments ---------------------------------------------------------------------------

TEST_CASE("Encoder: a token id outside [0, V) is an hg::Error naming it and its position",
          "[encoder]") {
    const int B = 2, T = 3, C = 4, V = 10;
    std::vector<float> wte(V * C, 1.0f), wpe(T * C, 1.0f), out(B * T * C, -7.0f);
    std::vector<int> idx = {1, 2, 3, 4, 5, 6};
    idx[4] = 10;  // (b = 1, t = 1), == V
    REQUIRE_THROWS_AS(encoder_forward(out.data(), idx.data(), wte.data(), wpe.data(), B, T, C, V),
                      hg::Error);
    REQUIRE_THROWS_WITH(encoder_forward(out.data(), idx.data(), wte.data(), wpe.data(), B, T, C, V),
                        Catch::Contains("token id 10") && Catch::Contains("b = 1, t = 1") &&
                            Catch::Contains("V = 10"));
    CHECK(std::all_of(out.begin(), out.end(), [](float x) { return x == -7.0f; }));  // no writes
    idx[4] = 4;
    idx[2] = -1;
    REQUIRE_THROWS_WITH(encoder_forward(out.data(), idx.data(), wte.data(), wpe.data(), B, T, C, V),
                        Catch::Contains("token id -1") && Catch::Contains("b = 0, t = 2"));
    REQUIRE_THROWS_WITH(encoder_forward_twin(out.data(), idx.data(), wte.data(), wpe.data(), B, T,
                                             C, V),
                        Catch::Contains("token id -1"));
    idx[2] = 9;  // V - 1 is fine
    REQUIRE_NOTHROW(encoder_forward(out.data(), idx.data(), wte.data(), wpe.data(), B, T, C, V));
}

TEST_CASE("Negative or zero sizes and p outside [0, 1) are hg::Error",
          "[encoder][layernorm][gelu][residual][dropout]") {
    std::vector<float> a(64, 1.0f), b(64, 1.0f), c(64, 1.0f), d(64, 1.0f);
    std::vector<int> idx(8, 0);
    const int neg = -3;
    const size_t neg_n = static_cast<size_t>(neg);  // a negative int passed as a size_t
    float* p = a.data();
    const float* q = b.data();

    CHECK_THROWS_AS(encoder_forward(p, idx.data(), q, q, 2, neg, 4, 8), hg::Error);
    CHECK_THROWS_AS(encoder_forward(p, idx.data(), q, q, 2, 2, 4, 0), hg::Error);
    CHECK_THROWS_AS(encoder_backward(p, p, q, idx.data(), 0, 2, 4), hg::Error);
    CHECK_THROWS_AS(sinusoidal_table(p, 4, 0), hg::Error);
    CHECK_THROWS_WITH(layernorm_forward(p, c.data(), d.data(), q, q, q, 2, neg),
                      Catch::Contains("C = -3"));
    CHECK_THROWS_AS(layernorm_backward(p, c.data(), d.data(), q, q, q, q, q, neg, 4), hg::Error);
    CHECK_THROWS_AS(layernorm_forward_twin(p, c.data(), d.data(), q, q, q, 0, 4), hg::Error);
    CHECK_THROWS_WITH(gelu_forward(p, q, neg_n, GeluKind::Erf), Catch::Contains("n (-3)"));
    CHECK_THROWS_AS(gelu_backward(p, q, q, 0, GeluKind::Tanh), hg::Error);
    CHECK_THROWS_AS(gelu_forward_twin(p, q, 0, GeluKind::Tanh), hg::Error);
    CHECK_THROWS_WITH(gelu_backward_bf16(p, nullptr, q, q, 8, GeluKind::Erf), Catch::Contains("dinp16"));
    CHECK_THROWS_AS(residual_forward(p, q, q, neg_n), hg::Error);
    CHECK_THROWS_AS(dropout_forward(p, q, neg_n, Dropout{0.1f, 1}), hg::Error);
    CHECK_THROWS_WITH(dropout_forward(p, q, 8, Dropout{1.0f, 1}), Catch::Contains("p (1)"));
    CHECK_THROWS_AS(dropout_backward(p, q, 8, Dropout{-0.1f, 1}), hg::Error);
    CHECK_THROWS_AS(dropout_forward_twin(p, q, 8, Dropout{NAN, 1}), hg::Error);
}

TEST_CASE("layers reject bad arguments with hg::Error", "[linear][attention][crossentropy]") {
    std::vector<float> buf(4096);
    float* f = buf.data();
    std::vector<double> dbuf(4096);
    double* d = dbuf.data();
    SECTION("attention: C not divisible by NH") {
        CHECK_THROWS_WITH(hg::attention_forward(f, f, f, f, 2, 3, 6, 4, Dropout{}),
                          "n_embd (C=6) must be divisible by n_head (4)");
        CHECK_THROWS_AS(hg::attention_backward(f, f, f, f, f, 2, 3, 6, 4, Dropout{}), hg::Error);
        CHECK_THROWS_AS(hg::attention_forward_twin(d, d, d, d, 2, 3, 6, 4, Dropout{}), hg::Error);
        CHECK_THROWS_AS(hg::attention_backward_twin(d, d, d, d, d, 2, 3, 6, 4, Dropout{}),
                        hg::Error);
    }
    SECTION("attention: zero or negative sizes, dropout p out of [0, 1)") {
        CHECK_THROWS_AS(hg::attention_forward(f, f, f, f, -1, 3, 6, 2, Dropout{}), hg::Error);
        CHECK_THROWS_AS(hg::attention_forward(f, f, f, f, 2, 0, 6, 2, Dropout{}), hg::Error);
        CHECK_THROWS_AS(hg::attention_forward(f, f, f, f, 2, 3, -6, 2, Dropout{}), hg::Error);
        CHECK_THROWS_WITH(hg::attention_forward(f, f, f, f, 2, 3, 6, 0, Dropout{}),
                          Catch::Contains("NH=0"));
        CHECK_THROWS_AS(hg::attention_backward(f, f, f, f, f, 2, -3, 6, 2, Dropout{}), hg::Error);
        CHECK_THROWS_AS(hg::attention_forward(f, f, f, f, 2, 3, 6, 2, Dropout{1.0f, 1}), hg::Error);
    }
    SECTION("linear: zero or negative sizes") {
        CHECK_THROWS_WITH(hg::linear_forward(f, f, f, nullptr, -1, 3, 2), Catch::Contains("N=-1"));
        CHECK_THROWS_AS(hg::linear_forward(f, f, f, f, 2, 0, 2), hg::Error);
        CHECK_THROWS_AS(hg::linear_backward(f, f, f, f, f, f, 2, 3, -2), hg::Error);
        CHECK_THROWS_AS(hg::linear_forward_twin(d, d, d, d, 0, 3, 2), hg::Error);
    }
    SECTION("cross-entropy: target >= V, target < -1, bad sizes") {
        std::vector<int> targets = {0, 2, 7, 1};
        CHECK_THROWS_WITH(hg::crossentropy_forward(f, f, f, targets.data(), 4, 7),
                          "cross-entropy: target 7 at row 2 is outside [-1, V=7)");
        CHECK_THROWS_AS(hg::crossentropy_backward(f, f, targets.data(), 4, 7, 1.0f), hg::Error);
        CHECK_THROWS_AS(hg::crossentropy_forward_twin(d, d, d, targets.data(), 4, 7), hg::Error);
        targets[2] = -2;
        CHECK_THROWS_WITH(hg::crossentropy_forward(f, f, f, targets.data(), 4, 7),
                          Catch::Contains("target -2"));
        targets[2] = 0;
        CHECK_NOTHROW(hg::crossentropy_forward(f, f, f, targets.data(), 4, 7));
        CHECK_THROWS_AS(hg::crossentropy_forward(f, f, f, targets.data(), 0, 7), hg::Error);
        CHECK_THROWS_AS(hg::crossentropy_forward(f, f, f, targets.data(), 4, -7), hg::Error);
    }
}

// ---- Dropout's mask --------------------------------------------------------------------------

TEST_CASE("Dropout: p = 0 is the identity; fraction dropped ~ p; same mask in both passes",
          "[dropout]") {
    const size_t n = size_t(1) << 20;
    std::vector<float> inp = randn<float>(n, 1), out(n), dinp(n, 0.0f), ones(n, 1.0f);

    SECTION("p = 0: forward copies, backward passes the gradient unchanged") {
        dropout_forward(out.data(), inp.data(), n, Dropout{0.0f, 42});
        CHECK(mismatches(out, inp) == 0);
        dropout_backward(dinp.data(), inp.data(), n, Dropout{0.0f, 42});
        CHECK(mismatches(dinp, inp) == 0);
    }
    SECTION("p = 0.3: about 30% dropped, the rest scaled by 1/0.7, backward uses the same mask") {
        const Dropout drop{0.3f, 0xabcdef};
        dropout_forward(out.data(), inp.data(), n, drop);
        size_t dropped = 0, bad_scale = 0;
        for (size_t i = 0; i < n; i++) {
            if (out[i] == 0.0f) dropped++;
            else if (out[i] != inp[i] * drop.scale()) bad_scale++;
        }
        const double frac = double(dropped) / n;  // σ = sqrt(0.3·0.7/2²⁰) = 4.5e-4
        CAPTURE(frac);
        CHECK(std::fabs(frac - 0.3) < 0.003);
        CHECK(bad_scale == 0);
        dropout_backward(dinp.data(), ones.data(), n, drop);  // dinp = multipliers
        size_t mismatch = 0;
        for (size_t i = 0; i < n; i++) mismatch += (dinp[i] == 0.0f) != (out[i] == 0.0f);
        CHECK(mismatch == 0);
        // A different key gives a different mask.
        std::vector<float> out2(n);
        dropout_forward(out2.data(), inp.data(), n, Dropout{0.3f, 0xabcdef + 1});
        CHECK(mismatches(out2, out) > n / 10);
    }
    SECTION("in place (out == inp) gives the same result") {
        const Dropout drop{0.5f, 9};
        dropout_forward(out.data(), inp.data(), n, drop);
        std::vector<float> x = inp;
        dropout_forward(x.data(), x.data(), n, drop);
        CHECK(mismatches(x, out) == 0);
    }
}

// ---- Sinusoidal table ------------------------------------------------------------------------

TEST_CASE("sinusoidal_table: values by hand", "[encoder]") {
    SECTION("row 0: sin 0 = 0 in even columns, cos 0 = 1 in odd columns") {
        for (int C : {5, 6, 8}) {
            std::vector<float> tab(size_t(3) * C);
            sinusoidal_table(tab.data(), 3, C);
            for (int c = 0; c < C; c++) CHECK(tab[c] == (c % 2 == 0 ? 0.0f : 1.0f));
        }
    }
    SECTION("C = 4: frequencies 1 and 10000^(-1/2) = 0.01") {
        std::vector<double> tab(size_t(3) * 4);
        sinusoidal_table(tab.data(), 3, 4);
        CHECK(tab[1 * 4 + 0] == Approx(0.8414709848078965).epsilon(1e-14));   // sin(1)
        CHECK(tab[1 * 4 + 1] == Approx(0.5403023058681398).epsilon(1e-14));   // cos(1)
        CHECK(tab[1 * 4 + 2] == Approx(0.009999833334166664).epsilon(1e-14));  // sin(0.01)
        CHECK(tab[1 * 4 + 3] == Approx(0.9999500004166653).epsilon(1e-14));   // cos(0.01)
        CHECK(tab[2 * 4 + 0] == Approx(0.9092974268256817).epsilon(1e-14));   // sin(2)
        CHECK(tab[2 * 4 + 3] == Approx(0.9998000066665778).epsilon(1e-14));   // cos(0.02)
    }
    SECTION("C = 6, t = 5: frequency 10000^(-2/6) = 0.046415888...; C = 5 ends with a sine") {
        std::vector<double> tab(size_t(6) * 6);
        sinusoidal_table(tab.data(), 6, 6);
        CHECK(tab[5 * 6 + 2] == Approx(0.23000171166476743).epsilon(1e-12));  // sin(5·0.0464158883)
        CHECK(tab[5 * 6 + 3] == Approx(0.9731902242785205).epsilon(1e-12));  // cos(5·0.0464158883)
        std::vector<double> odd(size_t(6) * 5);
        sinusoidal_table(odd.data(), 6, 5);
        // column 4 is 2i = 4: sin(5 · 10000^(-4/5)) = sin(5 · 6.309573e-4)
        CHECK(odd[5 * 5 + 4] == Approx(0.003154781489306837).epsilon(1e-12));
    }
}

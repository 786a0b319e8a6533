// Muon (lib/optim/muon.h): the Newton–Schulz band, one step against a plain double reference, planted
// bugs caught, the groups the tensor table gives, and an exact resume with Muon's momentum.
#include "tests/catch.h"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "lib/core/rng.h"
#include "lib/data/dataset.h"
#include "lib/model/probe.h"
#include "lib/optim/muon.h"
#include "lib/text/char_tokenizer.h"
#include "lib/text/tokenizer.h"
#include "lib/train/trainer.h"
#include "tests/muon_checks.h"

using namespace hg;
using namespace hg::muon_checks;
namespace fs = std::filesystem;

namespace {

// The reference Muon step for one matrix W (rows, cols), in double and written plainly: the
// iteration runs on the (rows, cols) orientation as given, with the Gram matrix XᵀX on the right
// when rows > cols (X XᵀX = X·(XᵀX)), so it shares no transpose logic with the library.
std::vector<double> reference_step(std::vector<double> w, const std::vector<double>& g, std::vector<double>& buf,
                                   int rows, int cols, double lr, double wd, double mu) {
    const size_t n = size_t(rows) * cols;
    std::vector<double> x(n);
    for (size_t i = 0; i < n; i++) {
        buf[i] = mu * buf[i] + g[i];
        x[i] = g[i] + mu * buf[i];
    }
    const double norm = frobenius(x) + 1e-7;
    for (double& v : x) v /= norm;
    auto mul = [](const std::vector<double>& p, const std::vector<double>& q, int m, int k, int nn, bool pt, bool qt) {
        std::vector<double> out(size_t(m) * nn, 0.0);  // (m, nn) = op(p) (m, k) · op(q) (k, nn)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < nn; j++)
                for (int l = 0; l < k; l++)
                    out[size_t(i) * nn + j] += (pt ? p[size_t(l) * m + i] : p[size_t(i) * k + l]) *
                                               (qt ? q[size_t(j) * k + l] : q[size_t(l) * nn + j]);
        return out;
    };
    const double a = 3.4445, b = -4.7750, c = 2.0315;
    for (int s = 0; s < 5; s++) {
        std::vector<double> next(n);
        if (rows <= cols) {  // X ← a·X + (b·A + c·A²)·X, A = X Xᵀ (rows, rows)
            const auto A = mul(x, x, rows, cols, rows, false, true), A2 = mul(A, A, rows, rows, rows, false, false);
            std::vector<double> poly(A.size());
            for (size_t i = 0; i < A.size(); i++) poly[i] = b * A[i] + c * A2[i];
            const auto px = mul(poly, x, rows, rows, cols, false, false);
            for (size_t i = 0; i < n; i++) next[i] = a * x[i] + px[i];
        } else {  // X ← a·X + X·(b·A + c·A²), A = XᵀX (cols, cols)
            const auto A = mul(x, x, cols, rows, cols, true, false), A2 = mul(A, A, cols, cols, cols, false, false);
            std::vector<double> poly(A.size());
            for (size_t i = 0; i < A.size(); i++) poly[i] = b * A[i] + c * A2[i];
            const auto xp = mul(x, poly, rows, cols, cols, false, false);
            for (size_t i = 0; i < n; i++) next[i] = a * x[i] + xp[i];
        }
        x = next;
    }
    const double scale = 0.2 * std::sqrt(double(std::max(rows, cols)));
    for (size_t i = 0; i < n; i++) w[i] = w[i] * (1 - lr * wd) - lr * scale * x[i];
    return w;
}

double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
    double worst = 0, scale = 0;
    for (double v : b) scale = std::max(scale, std::abs(v));
    for (size_t i = 0; i < a.size(); i++) worst = std::max(worst, std::abs(a[i] - b[i]) / scale);
    return worst;
}

}  // namespace

TEST_CASE("Newton–Schulz puts every singular value in the documented band", "[muon]") {
    Rng rng(7);
    SECTION("random Gaussian, square and wide") {
        for (auto [a, b] : {std::pair{32, 32}, std::pair{24, 72}, std::pair{1, 40}}) {
            INFO(a << "x" << b);
            const NsResult r = run_ns(gaussian(size_t(a) * b, rng), a, b);
            CHECK(band_violations(r) == 0);
            CHECK(r.out.front() <= kBandHi);
        }
    }
    SECTION("ill-conditioned: singular values from 1 down to 1e-2") {
        std::vector<double> sigma(20);
        for (int i = 0; i < 20; i++) sigma[i] = std::pow(10.0, -2.0 * i / 19);
        const NsResult r = run_ns(with_singular_values(20, 50, sigma, rng), 20, 50);
        CHECK(r.in.back() / frobenius(r.in) > kBandFrom);  // every one in the band's domain
        CHECK(band_violations(r) == 0);
        CHECK(r.out.back() > kBandLo);  // the smallest grew ~100-fold
    }
    SECTION("rank-deficient: rank 5 of 24; the zero singular values stay ~0") {
        const NsResult r = run_ns(with_singular_values(24, 40, {3, 2, 1, 0.5, 0.2}, rng), 24, 40);
        CHECK(band_violations(r) == 0);
        for (int i = 0; i < 5; i++) CHECK(r.out[i] > kBandLo);
        for (size_t i = 5; i < r.out.size(); i++) CHECK(r.out[i] < 0.02);
    }
    SECTION("a planted wrong coefficient leaves the band") {
        const auto x = gaussian(24 * 72, rng);
        CHECK(band_violations(run_ns(x, 24, 72)) == 0);
        CHECK(band_violations(run_ns(x, 24, 72, NsCoefficients{3.4445, -4.7750, 2.5})) > 0);
        CHECK(band_violations(run_ns(x, 24, 72, NsCoefficients{3.4445, -4.0, 2.0315})) > 0);
    }
}

TEST_CASE("Newton–Schulz by hand: one row is scaled to φ⁵(1) along itself", "[muon]") {
    // A (1, b) matrix has one singular value ‖x‖; after the normalisation it is 1 (up to eps),
    // so the result is x/‖x‖ · φ(φ(φ(φ(φ(1))))) with φ(σ) = 3.4445σ − 4.7750σ³ + 2.0315σ⁵.
    std::vector<double> x = {3, -4, 0, 12};  // ‖x‖ = 13
    double s = 1 / (1 + 1e-7 / 13);
    for (int i = 0; i < 5; i++) s = 3.4445 * s - 4.7750 * s * s * s + 2.0315 * s * s * s * s * s;
    std::vector<double> xd = x, scratch(newton_schulz_scratch(1, 4));
    newton_schulz(xd.data(), 1, 4, scratch.data());
    for (int i = 0; i < 4; i++) CHECK(xd[i] == Approx(x[i] / 13 * s).margin(1e-14));
    CHECK(s == Approx(0.696).margin(0.001));  // φ⁵(1): inside the band [0.68, 1.16], not exactly 1
}

TEST_CASE("one Muon step equals a plain double reference, wide and tall; planted bugs are caught", "[muon]") {
    Rng rng(11);
    const std::vector<std::pair<int, int>> shapes = {{5, 9}, {12, 4}};  // wide, tall (iterates on the transpose)
    std::vector<MuonMatrix> mats;
    size_t P = 0;
    for (auto [r, c] : shapes) mats.push_back({P, r, c}), P += size_t(r) * c;
    const auto w0 = gaussian(P, rng, 0.1), g = gaussian(P, rng, 0.01), buf0 = gaussian(P, rng, 0.01);
    const double lr = 0.02, wd = 0.1, mu = 0.9;

    std::vector<double> expect(P), expect_buf = buf0;
    for (const MuonMatrix& m : mats) {
        const size_t n = size_t(m.rows) * m.cols;
        std::vector<double> w(w0.begin() + m.offset, w0.begin() + m.offset + n),
            gg(g.begin() + m.offset, g.begin() + m.offset + n), b(buf0.begin() + m.offset, buf0.begin() + m.offset + n);
        const auto out = reference_step(w, gg, b, m.rows, m.cols, lr, wd, mu);
        std::copy(out.begin(), out.end(), expect.begin() + m.offset);
        std::copy(b.begin(), b.end(), expect_buf.begin() + m.offset);
    }
    SECTION("double (the scalar twin) to rounding, float to float precision") {
        Muon<double> md;
        md.build(mats);
        std::vector<double> w = w0, buf = buf0;
        md.step(w.data(), g.data(), buf.data(), lr, wd, mu);
        CHECK(max_rel_diff(w, expect) < 1e-12);
        CHECK(buf == expect_buf);

        Muon<float> mf;
        mf.build(mats);
        std::vector<float> wf(w0.begin(), w0.end()), gf(g.begin(), g.end()), bf(buf0.begin(), buf0.end());
        mf.step(wf.data(), gf.data(), bf.data(), lr, wd, mu);
        CHECK(max_rel_diff(std::vector<double>(wf.begin(), wf.end()), expect) < 1e-5);
        // the step itself moved the weights by far more than that tolerance
        CHECK(max_rel_diff(w0, expect) > 1e-3);
    }
    SECTION("a wrong coefficient, and a result not transposed back, are both caught") {
        Muon<double> md;
        md.build(mats);
        std::vector<double> w = w0, buf = buf0;
        md.step(w.data(), g.data(), buf.data(), lr, wd, mu, NsCoefficients{3.4445, -4.7750, 2.1});
        CHECK(max_rel_diff(w, expect) > 1e-3);
        // the tall matrix's update read in the wide orientation's layout: what a missing
        // transpose back would write
        w = w0, buf = buf0;
        md.step(w.data(), g.data(), buf.data(), lr, wd, mu);
        const MuonMatrix& tall = mats[1];
        std::vector<double> swapped = w;
        for (int r = 0; r < tall.rows; r++)
            for (int c = 0; c < tall.cols; c++) {
                const size_t i = size_t(r) * tall.cols + c, j = size_t(c) * tall.rows + r;
                swapped[tall.offset + j] = w[tall.offset + i];
            }
        CHECK(max_rel_diff(w, expect) < 1e-12);
        CHECK(max_rel_diff(swapped, expect) > 1e-3);
    }
}

TEST_CASE("Muon's groups come from the tensor table's roles and components", "[muon]") {
    GPTConfig c = preset("course");  // untied: lm_head is a Weight, but of the head, not a block
    const auto table = parameter_table(c);
    const OptimizerGroups adamw = optimizer_groups(table, OptimizerKind::AdamW);
    CHECK(adamw.muon.empty());
    CHECK(adamw.adamw.size() == table.size());
    const OptimizerGroups g = optimizer_groups(table, OptimizerKind::Muon);
    CHECK(g.muon.size() == size_t(4 * c.n_layer));  // c_attn, attn c_proj, c_fc, mlp c_proj
    size_t muon_params = 0, adamw_params = 0;
    for (const MuonMatrix& m : g.muon) muon_params += size_t(m.rows) * m.cols;
    for (const ParamSpan& s : g.adamw) adamw_params += s.size;
    CHECK(muon_params + adamw_params == parameter_count(c));
    const size_t C = c.n_embd;
    CHECK(muon_params == size_t(c.n_layer) * (3 * C * C + C * C + 8 * C * C));
    for (const TensorSpec& t : table) {
        INFO(t.name);
        const bool block_weight = t.name.find(".h.") != std::string::npos &&
                                  t.name.find(".weight") != std::string::npos &&
                                  t.name.find("ln_") == std::string::npos;
        CHECK(muon_trains(t) == block_weight);  // names agree with roles here, though roles decide
    }
    const std::string header = describe_optimizer(table, OptimizerKind::Muon, MuonConfig{}, AdamWConfig{});
    CHECK(header.find("optimizer: muon") != std::string::npos);
    CHECK(header.find(fmt::format("muon:  {} tensors, {} parameters", 4 * c.n_layer, muon_params)) !=
          std::string::npos);
    CHECK(header.find(fmt::format("adamw: {} tensors, {} parameters", table.size() - 4 * c.n_layer, adamw_params)) !=
          std::string::npos);
    CHECK(describe_optimizer(table, OptimizerKind::AdamW, MuonConfig{}, AdamWConfig{}).find("muon:") ==
          std::string::npos);
}

TEST_CASE("Muon's momentum warmup and bad settings", "[muon]") {
    MuonConfig m;
    m.momentum = 0.95f, m.momentum_warmup = 10;
    CHECK(muon_momentum_at(m, 0) == kMuonMomentumStart);
    CHECK(muon_momentum_at(m, 5) == Approx(0.9));
    CHECK(muon_momentum_at(m, 10) == 0.95f);
    CHECK(muon_momentum_at(m, 1000) == 0.95f);
    m.momentum_warmup = 0;
    CHECK(muon_momentum_at(m, 0) == 0.95f);
    REQUIRE_THROWS_WITH(parse_optimizer("sgd"), Catch::Contains("adamw or muon"));
    MuonConfig bad;
    bad.momentum = 1.0f;
    REQUIRE_THROWS_WITH(bad.validate(), Catch::Contains("muon_momentum"));
    bad = MuonConfig{}, bad.lr = -1;
    REQUIRE_THROWS_WITH(bad.validate(), Catch::Contains("muon_lr"));
    bad = MuonConfig{}, bad.momentum_warmup = -3;
    REQUIRE_THROWS_WITH(bad.validate(), Catch::Contains("muon_momentum_warmup"));
}

TEST_CASE("resume with Muon is exact: its momentum travels in the checkpoint", "[muon][resume][checkpoint]") {
    std::string text;
    for (int i = 0; i < 60; i++)
        text += "the quick brown fox jumps over the lazy dog. pack my box with five dozen jugs!\n";
    Tokenizer tok = Tokenizer::from_text(text);
    std::vector<int> ids = tok.encode(text);
    Split split = split_train_val(ids);
    GPTConfig c;
    c.vocab_size = tok.size(), c.block_size = 16, c.n_layer = 2, c.n_head = 2, c.n_embd = 32, c.dropout = 0.1f;
    TrainConfig tc;
    tc.batch_size = 4, tc.max_iters = 12;
    tc.schedule = LrSchedule{1e-3, 1e-4, 3, 12, true};
    tc.optimizer = OptimizerKind::Muon, tc.muon.lr = 2e-3f, tc.muon.momentum_warmup = 8;
    const int N = 6;
    const fs::path dir = fs::temp_directory_path() / ("handgrad-muon-resume-" + std::to_string(getpid()));
    fs::create_directories(dir);
    const std::string path = (dir / "ckpt.safetensors").string();

    Trainer straight, first, second;
    straight.start(c, tc, tok.vocab, split.train, split.val);
    for (int i = 0; i < 2 * N; i++) straight.step();
    first.start(c, tc, tok.vocab, split.train, split.val);
    for (int i = 0; i < N; i++) first.step();
    first.save(path);
    const Checkpoint ck = Checkpoint::load(path);
    second.resume(ck, tc, split.train, split.val);
    for (int i = 0; i < N; i++) second.step();
    const size_t P = straight.model.num_parameters;
    CHECK(std::memcmp(straight.model.params_memory.data(), second.model.params_memory.data(), P * sizeof(float)) == 0);
    CHECK(std::memcmp(straight.m.data(), second.m.data(), P * sizeof(float)) == 0);
    // Muon's matrices have a momentum (in m) and no second moment
    const MuonMatrix& w = straight.muon.matrices.at(0);
    double m_abs = 0, v_abs = 0;
    for (size_t i = 0; i < size_t(w.rows) * w.cols; i++)
        m_abs += std::abs(straight.m.data()[w.offset + i]), v_abs += std::abs(straight.v.data()[w.offset + i]);
    CHECK(m_abs > 0);
    CHECK(v_abs == 0);
    // a Muon checkpoint does not resume under AdamW, whose moments it does not hold
    TrainConfig other = tc;
    other.optimizer = OptimizerKind::AdamW;
    Trainer wrong;
    REQUIRE_THROWS_WITH(wrong.resume(ck, other, split.train, split.val), Catch::Contains("--optimizer=muon"));
    fs::remove_all(dir);
}

TEST_CASE("Muon reads the gradient through the clipping factor: two steps with different factors equal clipping "
          "first", "[muon][optim]") {
    // Newton–Schulz divides its input by its norm, so one step from zero momentum, or the same
    // factor on every step, gives the same update with or without the factor. Two steps with
    // different factors do not: the momentum then mixes the two gradients in the factors' ratio.
    Rng rng(21);
    const std::vector<std::pair<int, int>> shapes = {{6, 10}, {14, 5}};  // wide and tall
    std::vector<MuonMatrix> mats;
    size_t P = 0;
    for (auto [r, c] : shapes) mats.push_back({P, r, c}), P += size_t(r) * c;
    const auto w0 = gaussian(P, rng, 0.1), g1 = gaussian(P, rng, 0.5), g2 = gaussian(P, rng, 0.5);
    const double lr = 0.02, wd = 0.1, mu = 0.9;
    const double factors[2] = {0.37, 0.81};  // what clip_scale gives for norms of 2.7 and 1.23 at max_norm 1
    const std::vector<double>* grads[2] = {&g1, &g2};

    // The reference: each gradient multiplied by its factor first, then two plain double steps.
    std::vector<double> expect = w0, expect_buf(P, 0.0);
    for (int s = 0; s < 2; s++)
        for (const MuonMatrix& m : mats) {
            const size_t n = size_t(m.rows) * m.cols;
            std::vector<double> w(expect.begin() + m.offset, expect.begin() + m.offset + n), g(n),
                b(expect_buf.begin() + m.offset, expect_buf.begin() + m.offset + n);
            for (size_t i = 0; i < n; i++) g[i] = (*grads[s])[m.offset + i] * factors[s];
            const auto out = reference_step(w, g, b, m.rows, m.cols, lr, wd, mu);
            std::copy(out.begin(), out.end(), expect.begin() + m.offset);
            std::copy(b.begin(), b.end(), expect_buf.begin() + m.offset);
        }
    // The library in float, the factor passed as grad_scale, and the same with the gradient
    // clipped in place first: the same bits. Against the double reference: float precision.
    const auto run = [&](bool clip_first, const double (&f)[2]) {
        Muon<float> muon;
        muon.build(mats);
        std::vector<float> w(w0.begin(), w0.end()), buf(P, 0.0f);
        for (int s = 0; s < 2; s++) {
            std::vector<float> g(grads[s]->begin(), grads[s]->end());
            if (clip_first)
                for (float& x : g) x *= float(f[s]);
            muon.step(w.data(), g.data(), buf.data(), lr, wd, mu, {}, clip_first ? 1.0 : f[s]);
        }
        return w;
    };
    const std::vector<float> fused = run(false, factors), first = run(true, factors);
    CHECK(fused == first);
    CHECK(max_rel_diff(std::vector<double>(fused.begin(), fused.end()), expect) < 1e-5);
    // A step that ignored the factor is caught: unscaled, the second step weighs the gradients
    // otherwise.
    const double none[2] = {1.0, 1.0};
    const std::vector<float> unscaled = run(false, none);
    CHECK(max_rel_diff(std::vector<double>(unscaled.begin(), unscaled.end()), expect) > 1e-3);
    // And the reason two different factors are needed: one factor on both steps changes nothing
    // beyond rounding.
    const double same[2] = {0.37, 0.37};
    const std::vector<float> constant = run(false, same);
    CHECK(max_rel_diff(std::vector<double>(constant.begin(), constant.end()),
                       std::vector<double>(unscaled.begin(), unscaled.end())) < 1e-5);
}

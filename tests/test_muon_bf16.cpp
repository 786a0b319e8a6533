// Muon's fast step (lib/optim/muon.h): the matrices dealt to the threads give the same bits on 1,
// 2 or 3 threads, with either matmul backend, float or bf16 products; the bf16 Newton–Schulz
// keeps the band widened by muon.h's derived one-step amount, repeats itself bit for bit, and a
// planted wrong coefficient still leaves the band.
#include "tests/catch.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "lib/kernels/matmul.h"
#include "lib/kernels/matmul_bf16.h"
#include "tests/muon_checks.h"

using namespace hg;
using namespace hg::muon_checks;

namespace {

// muon.h's bound on one bf16 step's shift of a singular value, 7.1·2⁻⁸, rounded up.
constexpr double kBf16Margin = 0.03;

// The largest distance of an in-band singular value outside [lo, hi] (0: all inside).
double worst_outside(const NsResult& r, double lo, double hi) {
    const double norm = frobenius(r.in);
    double worst = 0;
    for (size_t i = 0; i < r.in.size(); i++)
        if (r.in[i] / norm >= kBandFrom) worst = std::max({worst, lo - r.out[i], r.out[i] - hi});
    return worst;
}

// Shapes like the speedrun's blocks (a quarter of their size, for the test's time), wide and tall.
const std::vector<std::pair<int, int>> kShapes = {{96, 32}, {32, 32}, {176, 32}, {32, 88}, {32, 96}, {40, 24}};

std::vector<MuonMatrix> layout(size_t& P) {
    std::vector<MuonMatrix> mats;
    P = 0;
    for (auto [r, c] : kShapes) mats.push_back({P, r, c}), P += size_t(r) * c;
    return mats;
}

// Two Muon steps on `threads` threads (build's slots and the process's setting both), from fixed
// weights and gradients; the weights, the momentum and the bf16 copies after them.
struct StepOut {
    std::vector<float> w, m;
    std::vector<bf16> w16;
};
StepOut two_steps(int threads, bool bf16_products) {
    size_t P;
    const std::vector<MuonMatrix> mats = layout(P);
    Rng rng(5);
    const auto w0 = gaussian(P, rng, 0.1), g1 = gaussian(P, rng, 0.01), g2 = gaussian(P, rng, 0.01);
    const int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    Muon<float> muon;
    muon.build(mats, bf16_products);
    StepOut o{std::vector<float>(w0.begin(), w0.end()), std::vector<float>(P, 0.0f), std::vector<bf16>(P)};
    for (const auto* g : {&g1, &g2}) {
        const std::vector<float> gf(g->begin(), g->end());
        muon.step(o.w.data(), gf.data(), o.m.data(), 0.02, 0.1, 0.9, {}, 0.7, o.w16.data());
    }
    omp_set_num_threads(before);
    return o;
}

}  // namespace

TEST_CASE("Muon's matrices dealt to threads: the same bits on 1, 2 and 3 threads", "[muon][threads]") {
    size_t P;
    const std::vector<MuonMatrix> mats = layout(P);
    SECTION("the deal: every matrix in one slot, the slots' FLOPs within the largest matrix's") {
        for (int threads : {1, 2, 3, 64}) {
            Muon<float> muon;
            muon.build(mats, false, threads);
            CHECK(muon.slots == threads);
            CHECK(muon.wide.empty());  // the speedrun's shapes, a quarter of their size: small
            CHECK(muon.used_slots == std::min<int>(threads, int(mats.size())));
            std::vector<int> seen = muon.order;
            std::sort(seen.begin(), seen.end());
            for (size_t i = 0; i < mats.size(); i++) CHECK(seen.at(i) == int(i));
            std::vector<double> load(muon.slots, 0.0);
            double largest = 0;
            for (int s = 0; s < muon.slots; s++)
                for (int j = muon.first[s]; j < muon.first[s + 1]; j++) {
                    const MuonMatrix& w = mats[muon.order[j]];
                    const double a = std::min(w.rows, w.cols), b = std::max(w.rows, w.cols);
                    load[s] += 4 * a * a * b + 2 * a * a * a,
                        largest = std::max(largest, 4 * a * a * b + 2 * a * a * a);
                }
            CHECK(*std::max_element(load.begin(), load.end()) - *std::min_element(load.begin(), load.end()) <= largest);
        }
    }
    for (MatmulBackend backend : matmul_backends())
        for (bool bf16_products : {false, true}) {
            INFO(to_string(backend) << (bf16_products ? ", bf16 products" : ", float products"));
            matmul_use(backend);
            const StepOut one = two_steps(1, bf16_products), two = two_steps(2, bf16_products),
                          three = two_steps(3, bf16_products);
            CHECK(std::memcmp(one.w.data(), two.w.data(), P * sizeof(float)) == 0);
            CHECK(std::memcmp(one.w.data(), three.w.data(), P * sizeof(float)) == 0);
            CHECK(std::memcmp(one.m.data(), three.m.data(), P * sizeof(float)) == 0);
            CHECK(one.w16 == three.w16);
            for (size_t i = 0; i < P; i++)  // each copy is its weight rounded
                if (one.w16[i] != bf16_from_float(one.w[i])) FAIL("bf16 copy " << i << " is not its weight's");
            matmul_use(MatmulBackend::OpenBLAS);
        }
    SECTION("bf16 products change the step, by bf16's rounding and no more") {
        const StepOut f = two_steps(2, false), h = two_steps(2, true);
        double worst = 0, scale = 0;
        for (size_t i = 0; i < P; i++)
            worst = std::max(worst, double(std::abs(f.w[i] - h.w[i]))),
            scale = std::max(scale, double(std::abs(f.w[i])));
        CHECK(worst > 0);
        CHECK(worst / scale < 0.05);
    }
}

TEST_CASE("a wide matrix runs alone, its products split over every thread; the small ones in the slots",
          "[muon][threads]") {
    // 320 × 1024: 4·320²·1024 + 2·320³ multiply-adds a step, over kWideFlops; 40 × 24: under it.
    const std::vector<MuonMatrix> mats = {{0, 320, 1024}, {320 * 1024, 40, 24}};
    const size_t P = 320 * 1024 + 40 * 24;
    Rng rng(7);
    const auto w0 = gaussian(P, rng, 0.1), g = gaussian(P, rng, 0.01);
    const std::vector<float> gf(g.begin(), g.end());
    const auto step = [&](int threads, std::vector<MatmulCall>* calls) {
        const int before = omp_get_max_threads();
        omp_set_num_threads(threads);
        Muon<float> muon;
        muon.build(mats);
        CHECK(muon.wide == std::vector<int>{0});
        std::vector<float> w(w0.begin(), w0.end()), m(P, 0.0f);
        matmul_record(calls);
        muon.step(w.data(), gf.data(), m.data(), 0.02, 0.1, 0.9);
        matmul_record(nullptr);
        omp_set_num_threads(before);
        return w;
    };
    std::vector<MatmulCall> calls;
    const std::vector<float> two = step(2, &calls);
    bool wide_seen = false, small_seen = false;
    for (const MatmulCall& c : calls) {
        INFO(to_string(c.form) << " " << c.M << " " << c.N << " " << c.K << ", team " << c.team);
        if (c.M == 320) {  // split over the process's threads
            wide_seen = true;
            CHECK(c.team == 1);
        }
        if (c.M == 24) {  // one thread of the slots' team
            small_seen = true;
            CHECK(c.team == 2);
        }
    }
    CHECK((wide_seen && small_seen));
    CHECK(step(2, nullptr) == two);  // a thread setting repeats itself bit for bit
    const std::vector<float> one = step(1, nullptr);
    double worst = 0;
    for (size_t i = 0; i < P; i++) worst = std::max(worst, double(std::abs(one[i] - two[i])));
    CHECK(worst < 1e-5);  // another thread count: the same step to float rounding
}

TEST_CASE("bf16 Newton–Schulz: the band widened by one step's rounding, repeatable, planted bugs caught",
          "[muon][bf16]") {
    Rng rng(9);
    const double lo = kBandLo - kBf16Margin, hi = kBandHi + kBf16Margin;
    for (bool widen : {false, true}) {
        INFO((widen ? "widened to float products" : "the process's bf16 products"));
        matmul_bf16_force_widen(widen);
        for (auto [a, b] : {std::pair{32, 32}, std::pair{32, 96}, std::pair{24, 72}, std::pair{1, 40}}) {
            INFO(a << "x" << b);
            const auto x = gaussian(size_t(a) * b, rng);
            const NsResult r = run_ns(x, a, b, {}, true);
            CHECK(band_violations(r, 2.0, lo, hi) == 0);
            CHECK(run_ns(x, a, b, {}, true).out == r.out);  // bit for bit twice
        }
        // ill-conditioned: singular values from 1 down to 1e-2, all in the band's domain
        std::vector<double> sigma(20);
        for (int i = 0; i < 20; i++) sigma[i] = std::pow(10.0, -2.0 * i / 19);
        const NsResult ill = run_ns(with_singular_values(20, 50, sigma, rng), 20, 50, {}, true);
        CHECK(band_violations(ill, 2.0, lo, hi) == 0);
        // rank 5 of 24: the five come out in the band (the zero ones are rounding noise, muon.h)
        const NsResult low = run_ns(with_singular_values(24, 40, {3, 2, 1, 0.5, 0.2}, rng), 24, 40, {}, true);
        for (int i = 0; i < 5; i++) CHECK((low.out[i] > lo && low.out[i] < hi));
        // planted: a wrong coefficient leaves even the widened band
        const auto x = gaussian(24 * 72, rng);
        CHECK(band_violations(run_ns(x, 24, 72, NsCoefficients{3.4445, -4.7750, 2.5}, true), 2.0, lo, hi) > 0);
        CHECK(band_violations(run_ns(x, 24, 72, NsCoefficients{3.4445, -4.0, 2.0315}, true), 2.0, lo, hi) > 0);
    }
    matmul_bf16_force_widen(false);
}

TEST_CASE("bf16 Newton–Schulz at the speedrun's sizes: how far it strays beyond the band", "[muon][bf16]") {
    Rng rng(3);
    for (auto [a, b] : {std::pair{128, 128}, std::pair{128, 384}}) {
        const NsResult r = run_ns(gaussian(size_t(a) * b, rng), a, b, {}, true);
        INFO(a << "x" << b << ": " << worst_outside(r, kBandLo, kBandHi) << " outside the float band");
        CHECK(worst_outside(r, kBandLo - kBf16Margin, kBandHi + kBf16Margin) == 0);
    }
}

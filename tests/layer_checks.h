// layer_checks.h — the checks a layer's tests share, on top of gradcheck.h:
//   check_grad / check_grad_fails   one tensor's gradient against central differences (double,
//                                   scalar twins): must pass, or, for a planted bug, must fail
//   for_each_target                 a body run once per SIMD target this CPU supports
//   scaled_error                    the float fast path against a twin: the largest error
//                                   relative to the array's scale
//   check_writes_and_adds           the contract of a fast backward: which outputs it adds to
//                                   (+=) and which it writes (=)
//   check_same_bits_with_1_2_3_threads   results independent of the thread count
// The worst error of every check is in its INFO message (run with -s to see the passing ones).
#pragma once
#include "tests/catch.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "lib/kernels/simd.h"
#include "tests/gradcheck.h"

namespace hg::test {

// CHECKs that analytic matches central differences of loss() in every entry of x.
// input_scale sets the step h = 1e-5·scale: the truncation error is h²/6 times the third
// derivative, which for the norms grows like rstd³ ~ 1/scale³ (LayerNorm at scale 0.1 with an
// unscaled h = 1e-5 used 65 % of its tolerance).
inline void check_grad(const char* what, std::vector<double>& x,
                       const std::vector<double>& analytic, const std::function<double()>& loss,
                       double input_scale = 1.0) {
    REQUIRE(x.size() == analytic.size());
    GradCheck opt;
    opt.h = 1e-5 * input_scale;
    const GradCheckResult res = gradcheck(x.data(), x.size(), analytic.data(), loss, opt);
    INFO(what << ": " << res.str());
    CHECK(res.checked == x.size());
    CHECK(res.ok);
}

// The same check on a backward known to be wrong: the checker must reject it.
inline void check_grad_fails(const char* what, std::vector<double>& x,
                             const std::vector<double>& analytic,
                             const std::function<double()>& loss, double input_scale = 1.0) {
    GradCheck opt;
    opt.h = 1e-5 * input_scale;
    const GradCheckResult res = gradcheck(x.data(), x.size(), analytic.data(), loss, opt);
    INFO(what << " (planted bug): " << res.str());
    CHECK_FALSE(res.ok);
}

// Runs body once per SIMD target, then restores normal dispatch (also on failure); body takes
// the target's name or nothing.
template <class F>
void for_each_target(F body) {
    struct Restore {
        ~Restore() { simd_force_target(0); }
    } restore;
    const auto targets = simd_targets();
    REQUIRE(!targets.empty());
    for (const auto& t : targets) {
        simd_force_target(t.bits);
        INFO("SIMD target " << t.name);
        REQUIRE(simd_current_target() == t.name);
        if constexpr (std::is_invocable_v<F, const std::string&>) body(t.name);
        else body();
    }
}

// max_i |got_i - want_i| / scale, by default scale = max_i |want_i|: the error relative to the
// array's scale.
template <typename A, typename B>
double scaled_error(const std::vector<A>& got, const std::vector<B>& want, double scale = 0) {
    REQUIRE(got.size() == want.size());
    double err = 0, max_want = 0;
    for (size_t i = 0; i < got.size(); i++) {
        const double e = std::fabs(double(got[i]) - double(want[i]));
        if (!(e <= err)) err = e;
        max_want = std::max(max_want, std::fabs(double(want[i])));
    }
    if (scale == 0) scale = max_want;
    return scale > 0 ? err / scale : err;
}

// The contract of a fast backward. backward(g) runs it into the output buffers g. Run once into
// zeros and once into g0 (random, with a NaN sentinel in the first entry of each written
// buffer): gradient k must come out as g0 + fresh where adds[k] (+=), and as fresh, whatever g0
// held, where not (=).
using Buffers = std::vector<std::vector<float>>;
inline void check_writes_and_adds(const char* what, Buffers g0, const std::vector<bool>& adds,
                                  const std::function<void(Buffers&)>& backward) {
    REQUIRE(g0.size() == adds.size());
    for (size_t k = 0; k < g0.size(); k++)
        if (!adds[k]) g0[k][0] = std::numeric_limits<float>::quiet_NaN();
    Buffers fresh = g0, after = g0;
    for (auto& g : fresh) std::fill(g.begin(), g.end(), 0.0f);
    backward(fresh);
    backward(after);
    for (size_t k = 0; k < g0.size(); k++)
        for (size_t i = 0; i < g0[k].size(); i++) {
            INFO(what << ", gradient " << k << (adds[k] ? " (adds)" : " (writes)") << ", entry "
                      << i);
            const float want = adds[k] ? g0[k][i] + fresh[k][i] : fresh[k][i];
            REQUIRE(std::isfinite(after[k][i]));
            REQUIRE(after[k][i] == Approx(want).margin(1e-5));
        }
}

#ifdef _OPENMP
// CHECKs that run() returns bit-identical arrays with 1, 2 and 3 OpenMP threads (the thread
// count is restored after).
inline void check_same_bits_with_1_2_3_threads(const std::function<Buffers()>& run) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    const auto one = run();
    for (int threads : {2, 3}) {
        omp_set_num_threads(threads);
        CAPTURE(threads);
        const auto many = run();
        REQUIRE(many.size() == one.size());
        for (size_t k = 0; k < one.size(); k++) {
            CAPTURE(k);
            CHECK(mismatches(one[k], many[k]) == 0);
        }
    }
    omp_set_num_threads(saved);
}
#endif

}  // namespace hg::test

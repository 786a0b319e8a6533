// gradcheck.h — the central-difference gradient checker every backward pass is proven by.
//
// For a scalar loss L(x) and an analytic gradient g = dL/dx from a backward pass:
//   numeric_i = (L(x + h e_i) - L(x - h e_i)) / 2h          (error O(h²) + O(eps·|L|/h))
//   pass when |g_i - numeric_i| <= atol + rtol · |numeric_i|  for every checked i.
// Everything runs in double on the scalar twins, so with h = 1e-5 both error terms are
// ~1e-10 relative and the default tolerances (rtol 1e-6, atol 1e-9) are tight enough to
// catch a dropped term or a factor of 2, but never fail on rounding.
//
// The loss fed to a layer's check is sum(r ⊙ out) with r random: never a plain sum, which
// for a softmax is identically 1 and would let any backward pass.
//
// Below the checker: the random inputs and the comparisons the layer tests share.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "lib/core/rng.h"

namespace hg::test {

struct GradCheck {
    double h = 1e-5;
    double atol = 1e-9;
    double rtol = 1e-6;
    size_t max_checks = 0;  // 0: every entry; otherwise this many, evenly spread
};

struct GradCheckResult {
    bool ok = true;
    size_t checked = 0;
    size_t worst = 0;           // index of the entry with the largest error ratio
    double worst_ratio = 0;     // |g - numeric| / (atol + rtol·|numeric|): <= 1 passes
    double worst_analytic = 0, worst_numeric = 0;
    std::string str() const;
};

// Checks analytic[i] against central differences of loss() in x[i] (x is restored after).
inline GradCheckResult gradcheck(double* x, size_t n, const double* analytic,
                                 const std::function<double()>& loss, GradCheck opt = {}) {
    GradCheckResult res;
    size_t stride = (opt.max_checks == 0 || opt.max_checks >= n) ? 1 : n / opt.max_checks;
    for (size_t i = 0; i < n; i += stride) {
        double saved = x[i];
        x[i] = saved + opt.h;
        double plus = loss();
        x[i] = saved - opt.h;
        double minus = loss();
        x[i] = saved;
        double numeric = (plus - minus) / (2 * opt.h);
        double ratio = std::fabs(analytic[i] - numeric) / (opt.atol + opt.rtol * std::fabs(numeric));
        if (!(ratio <= 1.0)) res.ok = false;  // NaN fails too
        if (!(ratio <= res.worst_ratio)) {
            res.worst_ratio = ratio;
            res.worst = i;
            res.worst_analytic = analytic[i];
            res.worst_numeric = numeric;
        }
        res.checked++;
    }
    return res;
}

inline std::string GradCheckResult::str() const {
    return "checked " + std::to_string(checked) + ", worst at [" + std::to_string(worst) +
           "]: analytic " + std::to_string(worst_analytic) + " numeric " +
           std::to_string(worst_numeric) + " (error/tolerance " + std::to_string(worst_ratio) + ")";
}

// n numbers drawn from N(0, scale²) with a fixed seed.
template <typename real = double>
std::vector<real> randn(size_t n, uint64_t seed, double scale = 1.0) {
    Rng rng(seed);
    std::vector<real> v(n);
    for (auto& x : v) x = real(scale * rng.normal());
    return v;
}

// How many entries differ (bitwise-equal floats compare equal). Used instead of CHECK(a == b)
// on big arrays, which on failure would print every element.
inline size_t mismatches(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return std::max(a.size(), b.size());
    size_t k = 0;
    for (size_t i = 0; i < a.size(); i++) k += !(a[i] == b[i]);
    return k;
}

// sum(r ⊙ out): the scalar loss every layer check differentiates.
template <typename real>
double dot(const std::vector<real>& r, const real* out) {
    double s = 0;
    for (size_t i = 0; i < r.size(); i++) s += double(r[i]) * double(out[i]);
    return s;
}

// Random class targets in [0, V) for the cross-entropy tests; row 1 (when N > 1) is ignored
// (-1), so every case includes an ignored row.
inline std::vector<int> ce_targets(int N, int V, uint64_t seed) {
    Rng rng(seed);
    std::vector<int> t(N);
    for (int n = 0; n < N; n++) t[n] = (int)rng.below((uint64_t)V);
    if (N > 1) t[1] = -1;  // every case includes an ignored row
    return t;
}

inline std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// max over i of |got_i - want_i| / (atol + rtol·|want_i|): <= 1 means every entry is within
// tolerance. NaN anywhere gives NaN (which fails a <= 1 check).
template <typename A, typename B>
double worst_ratio(const A* got, const B* want, size_t n, double atol, double rtol) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double r = std::fabs(double(got[i]) - double(want[i])) /
                   (atol + rtol * std::fabs(double(want[i])));
        if (std::isnan(r)) return r;
        worst = std::max(worst, r);
    }
    return worst;
}

inline bool all_finite(const float* x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!std::isfinite(x[i])) return false;
    return true;
}

}  // namespace hg::test

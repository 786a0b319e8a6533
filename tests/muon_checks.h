// muon_checks.h — what the Muon tests share: matrices with chosen singular values, Newton–Schulz
// run and its singular values measured (lib/model/probe.h's Jacobi SVD), the band check.
#pragma once
#include <cmath>
#include <vector>

#include "lib/core/rng.h"
#include "lib/model/probe.h"
#include "lib/optim/muon.h"

namespace hg::muon_checks {

// The band muon.h documents: singular values at or above 0.005·‖X‖_F come out in [0.68, 1.16]
// in exact arithmetic; float rounding gets a small margin.
constexpr double kBandLo = 0.67, kBandHi = 1.17, kBandFrom = 0.005;

inline Matrix to_matrix(const std::vector<double>& x, int rows, int cols) {
    Matrix m{rows, cols, x};
    return m;
}

inline double frobenius(const std::vector<double>& x) {
    double s = 0;
    for (double v : x) s += v * v;
    return std::sqrt(s);
}

// A (rows, cols) matrix with orthonormal columns (rows >= cols), by Gram–Schmidt on Gaussians.
inline std::vector<double> orthonormal_columns(int rows, int cols, Rng& rng) {
    std::vector<double> q(size_t(rows) * cols);
    for (double& v : q) v = rng.normal();
    for (int j = 0; j < cols; j++) {
        for (int k = 0; k < j; k++) {
            double d = 0;
            for (int i = 0; i < rows; i++) d += q[size_t(i) * cols + j] * q[size_t(i) * cols + k];
            for (int i = 0; i < rows; i++) q[size_t(i) * cols + j] -= d * q[size_t(i) * cols + k];
        }
        double n = 0;
        for (int i = 0; i < rows; i++) n += q[size_t(i) * cols + j] * q[size_t(i) * cols + j];
        for (int i = 0; i < rows; i++) q[size_t(i) * cols + j] /= std::sqrt(n);
    }
    return q;
}

// P diag(sigma) Qᵀ, (a, b), with P (a, r) and Q (b, r) orthonormal columns, r = sigma.size().
inline std::vector<double> with_singular_values(int a, int b, const std::vector<double>& sigma, Rng& rng) {
    const int r = int(sigma.size());
    const auto P = orthonormal_columns(a, r, rng), Q = orthonormal_columns(b, r, rng);
    std::vector<double> x(size_t(a) * b, 0.0);
    for (int i = 0; i < a; i++)
        for (int j = 0; j < b; j++)
            for (int k = 0; k < r; k++) x[size_t(i) * b + j] += P[size_t(i) * r + k] * sigma[k] * Q[size_t(j) * r + k];
    return x;
}

// Newton–Schulz of the library on x (a, b) in float, with float products or (bf16) bf16 ones;
// the singular values of the result, and of x.
struct NsResult {
    std::vector<double> in, out;
};
inline NsResult run_ns(const std::vector<double>& x, int a, int b, const NsCoefficients& k = {}, bool bf16 = false) {
    std::vector<float> xf(x.begin(), x.end()), scratch(newton_schulz_scratch(a, b));
    std::vector<uint16_t> scratch16(newton_schulz_scratch(a, b));
    if (bf16)
        newton_schulz_bf16(xf.data(), a, b, scratch.data(), scratch16.data(), 5, k);
    else
        newton_schulz(xf.data(), a, b, scratch.data(), 5, k);
    return {singular_values(to_matrix(x, a, b)),
            singular_values(to_matrix(std::vector<double>(xf.begin(), xf.end()), a, b))};
}

// How many singular values break the documented band: those at or above kBandFrom·‖x‖_F outside
// [lo, hi], and those of a zero input singular value above `zero_tol`.
inline int band_violations(const NsResult& r, double zero_tol = 0.02, double lo = kBandLo, double hi = kBandHi) {
    double norm2 = 0;
    for (double s : r.in) norm2 += s * s;
    int bad = 0;
    for (size_t i = 0; i < r.in.size(); i++) {
        const double rel = r.in[i] / std::sqrt(norm2);
        if (rel >= kBandFrom && (r.out[i] < lo || r.out[i] > hi)) bad++;
        if (rel < 1e-9 && r.out[i] > zero_tol) bad++;
    }
    return bad;
}

inline std::vector<double> gaussian(size_t n, Rng& rng, double sd = 1.0) {
    std::vector<double> x(n);
    for (double& v : x) v = sd * rng.normal();
    return x;
}

}  // namespace hg::muon_checks

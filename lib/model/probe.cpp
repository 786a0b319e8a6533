// probe.cpp — residual-stream norms, QK/OV circuits and their singular values (see probe.h).
#include "lib/model/probe.h"

#include <algorithm>
#include <cmath>

#include "lib/core/errors.h"

namespace hg {

template <typename real>
std::vector<double> residual_norms(const GPT<real>& m, int b) {
    check(m.T > 0, "residual_norms needs a forward pass first");
    check(b >= 0 && b < m.B, "batch row {} outside the last forward's batch of {}", b, m.B);
    const size_t C = m.config.n_embd, rows = size_t(m.T) * C, start = size_t(b) * rows;
    auto norm = [&](const real* x) {  // x (B, T, C): row b
        double s = 0;
        for (size_t i = 0; i < rows; i++) s += double(x[start + i]) * double(x[start + i]);
        return std::sqrt(s);
    };
    std::vector<double> norms{norm(m.acts.encoded)};
    for (const BlockActivations<real>& s : m.acts.h) norms.push_back(norm(s.res_3));
    return norms;
}

template <typename real>
void scale_residual_branches(GPT<real>& m, double factor) {
    const size_t C = m.config.n_embd;
    auto scale = [&](real* p, size_t n) {
        if (p)
            for (size_t i = 0; i < n; i++) p[i] = real(p[i] * factor);
    };
    for (BlockParameters<real>& w : m.params.h) {
        scale(w.attn_proj_w, C * C), scale(w.attn_proj_b, C);
        scale(w.mlp_proj_w, C * 4 * C), scale(w.mlp_proj_b, C);
    }
}

HeadCircuits head_circuits(const GPT<float>& m, int layer, int head) {
    const GPTConfig& c = m.config;
    check(layer >= 0 && layer < c.n_layer, "layer {} outside [0, {})", layer, c.n_layer);
    check(head >= 0 && head < c.n_head, "head {} outside [0, {})", head, c.n_head);
    const int C = c.n_embd, hs = C / c.n_head;
    const BlockParameters<float>& w = m.params.h[layer];
    const float* Wq = w.attn_w + size_t(0 * C + head * hs) * C;  // (hs, C) rows of c_attn
    const float* Wk = w.attn_w + size_t(1 * C + head * hs) * C;  // (hs, C)
    const float* Wv = w.attn_w + size_t(2 * C + head * hs) * C;  // (hs, C)
    const float* Wo = w.attn_proj_w;                             // (C, C): columns head*hs ..
    HeadCircuits hc;
    hc.qk = Matrix{C, C, std::vector<double>(size_t(C) * C)};
    hc.ov = Matrix{C, C, std::vector<double>(size_t(C) * C)};
    for (int i = 0; i < C; i++)
        for (int j = 0; j < C; j++) {
            double qk = 0, ov = 0;
            for (int k = 0; k < hs; k++) {
                qk += double(Wq[size_t(k) * C + i]) * double(Wk[size_t(k) * C + j]);      // (W_Qᵀ W_K)_ij
                ov += double(Wv[size_t(k) * C + i]) * double(Wo[size_t(j) * C + head * hs + k]);  // (W_Vᵀ W_Oᵀ)_ij
            }
            hc.qk.at(i, j) = qk, hc.ov.at(i, j) = ov;
        }
    return hc;
}

std::vector<double> singular_values(const Matrix& a) {
    // Work on the transpose when it is wide, so there are at most min(rows, cols) columns.
    const bool wide = a.cols > a.rows;
    const int m = wide ? a.cols : a.rows, n = wide ? a.rows : a.cols;  // u is (m, n), m >= n
    std::vector<double> u(size_t(m) * n);  // column-major: column j is u[j*m .. j*m + m)
    for (int i = 0; i < a.rows; i++)
        for (int j = 0; j < a.cols; j++) {
            const double x = a.at(i, j);
            if (wide) u[size_t(i) * m + j] = x;
            else u[size_t(j) * m + i] = x;
        }
    // Sweep over all column pairs; rotate (i, j) so the two columns become orthogonal:
    //   α = ‖uᵢ‖², β = ‖uⱼ‖², γ = uᵢ·uⱼ;  ζ = (β − α)/2γ,  t = sign(ζ)/(|ζ| + √(1 + ζ²)),
    //   c = 1/√(1 + t²), s = c·t;  uᵢ ← c·uᵢ − s·uⱼ,  uⱼ ← s·uᵢ + c·uⱼ.
    // Stop when every pair is orthogonal to within eps relative to its norms.
    const double eps = 1e-15;
    for (int sweep = 0; sweep < 60; sweep++) {
        bool rotated = false;
        for (int i = 0; i < n - 1; i++) {
            double* ui = &u[size_t(i) * m];
            for (int j = i + 1; j < n; j++) {
                double* uj = &u[size_t(j) * m];
                double alpha = 0, beta = 0, gamma = 0;
                for (int k = 0; k < m; k++) alpha += ui[k] * ui[k], beta += uj[k] * uj[k], gamma += ui[k] * uj[k];
                if (gamma == 0 || std::fabs(gamma) <= eps * std::sqrt(alpha * beta)) continue;
                rotated = true;
                const double zeta = (beta - alpha) / (2 * gamma);
                const double t = (zeta >= 0 ? 1.0 : -1.0) / (std::fabs(zeta) + std::sqrt(1 + zeta * zeta));
                const double cs = 1 / std::sqrt(1 + t * t), sn = cs * t;
                for (int k = 0; k < m; k++) {
                    const double x = ui[k], y = uj[k];
                    ui[k] = cs * x - sn * y, uj[k] = sn * x + cs * y;
                }
            }
        }
        if (!rotated) break;
    }
    std::vector<double> sigma(n);
    for (int j = 0; j < n; j++) {
        double s = 0;
        for (int k = 0; k < m; k++) s += u[size_t(j) * m + k] * u[size_t(j) * m + k];
        sigma[j] = std::sqrt(s);
    }
    std::sort(sigma.begin(), sigma.end(), [](double x, double y) { return x > y; });
    return sigma;
}

int numerical_rank(const std::vector<double>& sigma, double rtol) {
    if (sigma.empty() || sigma[0] == 0) return 0;
    int r = 0;
    for (double s : sigma) r += s > rtol * sigma[0];
    return r;
}

template std::vector<double> residual_norms(const GPT<float>&, int);
template std::vector<double> residual_norms(const GPT<double>&, int);
template void scale_residual_branches(GPT<float>&, double);
template void scale_residual_branches(GPT<double>&, double);

}  // namespace hg

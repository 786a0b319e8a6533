// matmul_bf16.cpp — see matmul_bf16.h.
#include "lib/kernels/matmul_bf16.h"

#include <atomic>
#include <cstring>
#include <vector>


#include "lib/core/errors.h"
#include "lib/kernels/matmul.h"
#include "lib/kernels/onednn_matmul.h"
#include "lib/kernels/simd.h"  // cpu_has_bf16_dot


namespace hg {

static std::atomic<bool> g_force_widen{false};
void matmul_bf16_force_widen(bool on) { g_force_widen = on; }

static bool onednn_usable() {
#ifdef HANDGRAD_ONEDNN
    static const bool usable = cpu_has_bf16_dot();
    return usable;
#else
    return false;
#endif
}

Bf16Backend matmul_bf16_backend() {
    return onednn_usable() && !g_force_widen ? Bf16Backend::OneDNN : Bf16Backend::Widen;
}

std::string matmul_bf16_describe() {
    if (matmul_bf16_backend() == Bf16Backend::OneDNN) return "onednn (bf16 dot products: AVX512_BF16)";
#ifdef HANDGRAD_ONEDNN
    const char* why = g_force_widen ? "forced" : "this CPU has no AVX512_BF16";
#else
    const char* why = "built without oneDNN";
#endif
    return std::string("widen (bf16 inputs widened to float, float products: ") + why + ")";
}

// ---- widen: the float products on the widened inputs ---------------------------------------
// Each thread widens into buffers of its own, which grow to the largest product on the first
// step and are reused after that (no allocation in later steps). A rows × cols operand with
// leading dimension ld is widened as the (rows − 1)·ld + cols numbers it spans, so the float
// copy has the same leading dimension.
static Mat<const float> widened(std::vector<float>& buf, Mat<const bf16> x) {
    const size_t n = x.rows > 0 && x.cols > 0 ? size_t(x.rows - 1) * x.ld + x.cols : 0;
    if (buf.size() < n) buf.resize(n);
    bf16_widen(buf.data(), x.data, n);
    return {buf.data(), x.rows, x.cols, x.ld};
}
static thread_local std::vector<float> t_wide_a, t_wide_b;

// oneDNN runs a product with at least one term (K > 0); an empty one (c = beta·c, or the bias)
// takes the widening path, whose float products know it.
static bool on_onednn(int K) { return matmul_bf16_backend() == Bf16Backend::OneDNN && K > 0; }

static void matmul_bf16(MatmulForm kind, Mat<float> c, Mat<const bf16> a, Mat<const bf16> b, float alpha,
                        float beta) {
    assert(matmul_shapes_agree(kind, c, a, b));
    if (c.rows <= 0 || c.cols <= 0) return;
#ifdef HANDGRAD_ONEDNN
    const int K = kind == MatmulForm::TN ? a.rows : a.cols;
    if (on_onednn(K))
        return onednn_matmul(OneDnnInput::BF16, kind == MatmulForm::TN, kind == MatmulForm::NT, c.data, a.data,
                             b.data, nullptr, c.rows, c.cols, K, a.ld, b.ld, c.ld, alpha, beta);
#endif
    const Mat<const float> wa = widened(t_wide_a, a), wb = widened(t_wide_b, b);
    if (kind == MatmulForm::NT) matmul_nt(c, wa, wb, alpha, beta);
    if (kind == MatmulForm::NN) matmul_nn(c, wa, wb, alpha, beta);
    if (kind == MatmulForm::TN) matmul_tn(c, wa, wb, alpha, beta);
}

void matmul_bf16_nt(Mat<float> c, Mat<const bf16> a, Mat<const bf16> b, float alpha, float beta) {
    matmul_bf16(MatmulForm::NT, c, a, b, alpha, beta);
}
void matmul_bf16_nt_bias(Mat<float> c, Mat<const bf16> a, Mat<const bf16> b, const float* bias) {
    assert(matmul_shapes_agree(MatmulForm::NT, c, a, b));
    if (c.rows <= 0 || c.cols <= 0) return;
#ifdef HANDGRAD_ONEDNN
    if (on_onednn(a.cols))
        return onednn_matmul(OneDnnInput::BF16, false, true, c.data, a.data, b.data, bias, c.rows, c.cols, a.cols,
                             a.ld, b.ld, c.ld, 1.0f, 0.0f);
#endif
    for (int m = 0; m < c.rows; m++) std::memcpy(c.data + size_t(m) * c.ld, bias, sizeof(float) * size_t(c.cols));
    matmul_bf16(MatmulForm::NT, c, a, b, 1.0f, 1.0f);
}
void matmul_bf16_nn(Mat<float> c, Mat<const bf16> a, Mat<const bf16> b, float alpha, float beta) {
    matmul_bf16(MatmulForm::NN, c, a, b, alpha, beta);
}
void matmul_bf16_tn(Mat<float> c, Mat<const bf16> a, Mat<const bf16> b, float alpha, float beta) {
    matmul_bf16(MatmulForm::TN, c, a, b, alpha, beta);
}

}  // namespace hg

// matmul_bf16.cpp — see matmul_bf16.h.
#include "lib/kernels/matmul_bf16.h"

#include <atomic>
#include <cstring>
#include <vector>

#include "lib/core/errors.h"
#include "lib/core/thread_buffer.h"
#include "lib/kernels/matmul.h"
#include "lib/kernels/onednn_matmul.h"
#include "lib/kernels/simd.h"  // cpu_has_bf16_dot

namespace hg {

static bool onednn_usable() {
#ifdef HANDGRAD_ONEDNN
    static const bool usable = cpu_has_bf16_dot();
    return usable;
#else
    return false;
#endif
}

// The way in use; -1 until one is set: the first that runs here.
static std::atomic<int> g_way{-1};

std::string to_string(Bf16Backend w) { return w == Bf16Backend::OneDNN ? "onednn" : "widen"; }

Bf16Backend parse_bf16_backend(const std::string& s) {
    if (s == "onednn") return Bf16Backend::OneDNN;
    if (s == "widen") return Bf16Backend::Widen;
    throw Error(fmt::format("--matmul_bf16 must be auto, onednn or widen (got '{}')", s));
}

std::vector<Bf16Backend> matmul_bf16_backends() {
    if (onednn_usable()) return {Bf16Backend::OneDNN, Bf16Backend::Widen};
    return {Bf16Backend::Widen};
}

std::string matmul_bf16_no_onednn() {
#ifdef HANDGRAD_ONEDNN
    return onednn_usable() ? "" : "this CPU has no AVX512_BF16";
#else
    return "this build has no oneDNN";
#endif
}

void matmul_bf16_use(Bf16Backend w) {
    check(w == Bf16Backend::Widen || onednn_usable(), "--matmul_bf16=onednn: {}; use widen or auto",
          matmul_bf16_no_onednn());
    g_way = int(w);
}

Bf16Backend matmul_bf16_backend() {
    const int w = g_way.load(std::memory_order_relaxed);
    return w < 0 ? matmul_bf16_backends().front() : Bf16Backend(w);
}

void matmul_bf16_force_widen(bool on) { g_way = on ? int(Bf16Backend::Widen) : -1; }

std::string matmul_bf16_describe() {
    return matmul_bf16_backend() == Bf16Backend::OneDNN
               ? "onednn (oneDNN's bf16 matmul, AVX512_BF16 dot products)"
               : "widen (bf16 inputs widened to float, float products)";
}

// ---- widen: the float products on the widened inputs ---------------------------------------
// Each thread widens a and b into buffers of its own (thread_buffer.h: grown by the first step,
// reused after it). A rows × cols operand with leading dimension ld is widened as the
// (rows − 1)·ld + cols numbers it spans, so the float copy has the same leading dimension.
struct WideA;
struct WideB;
template <typename Tag>
static Mat<const float> widened(Mat<const bf16> x) {
    const size_t n = x.rows > 0 && x.cols > 0 ? size_t(x.rows - 1) * x.ld + x.cols : 0;
    float* wide = thread_buffer<Tag>(n);
    bf16_widen(wide, x.data, n);
    return {wide, x.rows, x.cols, x.ld};
}

#ifdef HANDGRAD_ONEDNN
// oneDNN runs a product with at least one term (K > 0); an empty one (c = beta·c, or the bias)
// takes the widening path, whose float products know it.
static bool on_onednn(int K) { return matmul_bf16_backend() == Bf16Backend::OneDNN && K > 0; }
#endif

// The product the way in use, not recorded. With `bias` (the nt form, alpha 1, beta 0) the
// bias is added to every row of c as well.
static void compute(MatmulForm kind, Mat<float> c, Mat<const bf16> a, Mat<const bf16> b, float alpha, float beta,
                    const float* bias) {
#ifdef HANDGRAD_ONEDNN
    const int K = kind == MatmulForm::TN ? a.rows : a.cols;
    if (on_onednn(K))
        return onednn_matmul_bf16(kind == MatmulForm::TN, kind == MatmulForm::NT, c.data, a.data, b.data, bias, c.rows,
                                  c.cols, K, a.ld, b.ld, c.ld, alpha, beta);
#endif
    if (bias) {  // the bias copied into c, the product added onto it
        for (int m = 0; m < c.rows; m++) std::memcpy(c.data + size_t(m) * c.ld, bias, sizeof(float) * size_t(c.cols));
        beta = 1;
    }
    matmul_widened(kind, c, widened<WideA>(a), widened<WideB>(b), alpha, beta);
}

// The product as the layers call it: recorded while recording is on (matmul.h), computed unless
// that recording skips the products.
static void matmul_bf16(MatmulForm kind, Mat<float> c, Mat<const bf16> a, Mat<const bf16> b, float alpha, float beta,
                        const float* bias = nullptr) {
    assert(matmul_shapes_agree(kind, c, a, b));
    if (c.rows <= 0 || c.cols <= 0) return;
    const int K = kind == MatmulForm::TN ? a.rows : a.cols;
    if (matmul_note_bf16(kind, c.rows, c.cols, K, a.ld, b.ld, c.ld, beta)) compute(kind, c, a, b, alpha, beta, bias);
}

void matmul_bf16_nt(Mat<float> c, Mat<const bf16> a, Mat<const bf16> b, float alpha, float beta) {
    matmul_bf16(MatmulForm::NT, c, a, b, alpha, beta);
}
void matmul_bf16_nt_bias(Mat<float> c, Mat<const bf16> a, Mat<const bf16> b, const float* bias) {
    matmul_bf16(MatmulForm::NT, c, a, b, 1.0f, 0.0f, bias);
}
void matmul_bf16_nn(Mat<float> c, Mat<const bf16> a, Mat<const bf16> b, float alpha, float beta) {
    matmul_bf16(MatmulForm::NN, c, a, b, alpha, beta);
}
void matmul_bf16_tn(Mat<float> c, Mat<const bf16> a, Mat<const bf16> b, float alpha, float beta) {
    matmul_bf16(MatmulForm::TN, c, a, b, alpha, beta);
}

void matmul_bf16_run(const MatmulCall& m, float* c, const bf16* a, const bf16* b) {
    using In = Mat<const bf16>;
    const In ma = m.form == MatmulForm::TN ? In{a, m.K, m.M, m.lda} : In{a, m.M, m.K, m.lda};
    const In mb = m.form == MatmulForm::NT ? In{b, m.N, m.K, m.ldb} : In{b, m.K, m.N, m.ldb};
    compute(m.form, {c, m.M, m.N, m.ldc}, ma, mb, 1.0f, m.beta, nullptr);
}

}  // namespace hg

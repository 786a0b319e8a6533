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
static const float* widened(std::vector<float>& buf, const bf16* x, int rows, int cols, int ld) {
    const size_t n = rows > 0 && cols > 0 ? size_t(rows - 1) * ld + cols : 0;
    if (buf.size() < n) buf.resize(n);
    bf16_widen(buf.data(), x, n);
    return buf.data();
}
static thread_local std::vector<float> t_wide_a, t_wide_b;

// oneDNN runs a product with at least one term (K > 0); an empty one (c = beta·c, or the bias)
// takes the widening path, whose float products know it.
static bool on_onednn(int K) { return matmul_bf16_backend() == Bf16Backend::OneDNN && K > 0; }

// kind: 'T' for nt (b transposed), 'N' for nn, 't' for tn (a transposed).
static void matmul_bf16(char kind, float* c, const bf16* a, const bf16* b, int M, int N, int K, int lda, int ldb,
                        int ldc, float alpha, float beta) {
    if (M <= 0 || N <= 0) return;
#ifdef HANDGRAD_ONEDNN
    if (on_onednn(K))
        return onednn_matmul(OneDnnInput::BF16, kind == 't', kind == 'T', c, a, b, nullptr, M, N, K, lda, ldb, ldc,
                             alpha, beta);
#endif
    if (kind == 'T') {
        const float* wa = widened(t_wide_a, a, M, K, lda);
        matmul_nt(c, wa, widened(t_wide_b, b, N, K, ldb), M, N, K, lda, ldb, ldc, alpha, beta);
    } else if (kind == 'N') {
        const float* wa = widened(t_wide_a, a, M, K, lda);
        matmul_nn(c, wa, widened(t_wide_b, b, K, N, ldb), M, N, K, lda, ldb, ldc, alpha, beta);
    } else {
        const float* wa = widened(t_wide_a, a, K, M, lda);
        matmul_tn(c, wa, widened(t_wide_b, b, K, N, ldb), M, N, K, lda, ldb, ldc, alpha, beta);
    }
}

void matmul_bf16_nt(float* c, const bf16* a, const bf16* b, int M, int N, int K, int lda, int ldb, int ldc,
                    float alpha, float beta) {
    matmul_bf16('T', c, a, b, M, N, K, lda, ldb, ldc, alpha, beta);
}
void matmul_bf16_nt_bias(float* c, const bf16* a, const bf16* b, const float* bias, int M, int N, int K, int lda,
                         int ldb, int ldc) {
    if (M <= 0 || N <= 0) return;
#ifdef HANDGRAD_ONEDNN
    if (on_onednn(K))
        return onednn_matmul(OneDnnInput::BF16, false, true, c, a, b, bias, M, N, K, lda, ldb, ldc, 1.0f, 0.0f);
#endif
    for (int m = 0; m < M; m++) std::memcpy(c + size_t(m) * ldc, bias, sizeof(float) * size_t(N));
    matmul_bf16('T', c, a, b, M, N, K, lda, ldb, ldc, 1.0f, 1.0f);
}
void matmul_bf16_nn(float* c, const bf16* a, const bf16* b, int M, int N, int K, int lda, int ldb, int ldc,
                    float alpha, float beta) {
    matmul_bf16('N', c, a, b, M, N, K, lda, ldb, ldc, alpha, beta);
}
void matmul_bf16_tn(float* c, const bf16* a, const bf16* b, int M, int N, int K, int lda, int ldb, int ldc,
                    float alpha, float beta) {
    matmul_bf16('t', c, a, b, M, N, K, lda, ldb, ldc, alpha, beta);
}

}  // namespace hg

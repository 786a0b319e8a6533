// matmul_bf16.cpp — see matmul_bf16.h.
#include "lib/kernels/matmul_bf16.h"

#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

#include <omp.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "lib/core/errors.h"
#include "lib/kernels/matmul.h"
#include "lib/kernels/peak.h"  // cpu_has_bf16_dot

#ifdef HANDGRAD_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

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
    const size_t n = size_t(rows - 1) * ld + cols;
    if (buf.size() < n) buf.resize(n);
    bf16_widen(buf.data(), x, n);
    return buf.data();
}
static thread_local std::vector<float> t_wide_a, t_wide_b;

#ifdef HANDGRAD_ONEDNN
// ---- onednn ---------------------------------------------------------------------------------
// One primitive per product kind, shape, leading dimensions, alpha, beta and thread count (1
// inside a parallel region, where nested regions are off), in a list of each calling thread's
// own: the memory objects' data pointers are set before each call, so two threads must never
// share one. (Keying by the thread's number in its parallel region is not enough: a batch
// thread running attention's parallel loop is alone in that nested team, number 0 in each
// replica, and two replicas then raced on one product's pointers.) A list holds a few dozen
// entries for a model (its products' shapes), made on first use and kept to the thread's end,
// as is the thread's stream.
namespace {
using dims = dnnl::memory::dims;
using dt = dnnl::memory::data_type;

struct Key {
    char kind;
    int M, N, K, lda, ldb, ldc;
    float alpha, beta;
    bool bias;
    int threads;
    bool operator==(const Key& o) const {
        return kind == o.kind && M == o.M && N == o.N && K == o.K && lda == o.lda && ldb == o.ldb &&
               ldc == o.ldc && alpha == o.alpha && beta == o.beta && bias == o.bias && threads == o.threads;
    }
};

struct Product {
    Key key;
    dnnl::matmul prim;
    dnnl::memory src, wei, dst, bias, scratch;
    std::vector<uint8_t> scratch_buf;  // the primitive's scratchpad, ours (user mode)
};

// oneDNN's execute also takes one 32–128 KiB block from posix_memalign inside every call of
// these products and frees it before returning (seen with a counting posix_memalign; the [alloc]
// test counts operator new only). Freed at the top of glibc's heap, such a block is trimmed back
// to the system at once (a brk call and a TLB flush per product): 40 % of attention's bf16
// backward at the baby GPT's shape, whose products are small. Keeping 16 MiB of the heap's top
// when it trims (M_TOP_PAD) leaves the block in place for the next call. Set once, with the engine.
static void keep_heap_top() {
#ifdef __GLIBC__
    mallopt(M_TOP_PAD, 16 << 20);
#endif
}

dnnl::engine& engine() {
    static dnnl::engine e = (keep_heap_top(), dnnl::engine(dnnl::engine::kind::cpu, 0));
    return e;
}

// The matrix a (M,K) and b (K,N) as oneDNN reads them, from the kind: strides say which way
// each is stored, so a transposed operand is only a different stride, never a copy.
Product* make_product(const Key& k) {
    const dnnl::memory::dim M = k.M, N = k.N, K = k.K;
    dnnl::memory::desc a_md, b_md;
    if (k.kind == 't')  // a stored (K,M): element (m,k) at k·lda + m
        a_md = dnnl::memory::desc(dims{M, K}, dt::bf16, dims{1, k.lda});
    else
        a_md = dnnl::memory::desc(dims{M, K}, dt::bf16, dims{k.lda, 1});
    if (k.kind == 'T')  // nt: b stored (N,K): element (k,n) at n·ldb + k
        b_md = dnnl::memory::desc(dims{K, N}, dt::bf16, dims{1, k.ldb});
    else
        b_md = dnnl::memory::desc(dims{K, N}, dt::bf16, dims{k.ldb, 1});
    const dnnl::memory::desc c_md(dims{M, N}, dt::f32, dims{k.ldc, 1});
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (k.alpha != 1.0f) attr.set_output_scales(0, {k.alpha});
    if (k.beta != 0.0f) {
        dnnl::post_ops ops;
        ops.append_sum(k.beta);
        attr.set_post_ops(ops);
    }
    auto* p = new Product{k, {}, {}, {}, {}, {}, {}, {}};
    const dnnl::memory::desc bias_md(dims{1, N}, dt::f32, dims{N, 1});  // one row, added to every row of c
    const dnnl::matmul::primitive_desc pd(
        k.bias ? dnnl::matmul::desc(a_md, b_md, bias_md, c_md) : dnnl::matmul::desc(a_md, b_md, c_md), attr, engine());
    p->prim = dnnl::matmul(pd);
    p->src = dnnl::memory(a_md, engine(), nullptr);
    p->wei = dnnl::memory(b_md, engine(), nullptr);
    p->dst = dnnl::memory(c_md, engine(), nullptr);
    if (k.bias) p->bias = dnnl::memory(bias_md, engine(), nullptr);
    p->scratch_buf.resize(pd.scratchpad_desc().get_size() + 64);
    p->scratch = dnnl::memory(pd.scratchpad_desc(), engine(), p->scratch_buf.data());
    return p;
}

Product* find_product(const Key& k) {
    static thread_local std::vector<std::unique_ptr<Product>> products;  // this thread's own
    for (const auto& p : products)
        if (p->key == k) return p.get();
    products.emplace_back(make_product(k));
    return products.back().get();
}

// Runs the product through oneDNN's C interface with the arguments on the stack. oneDNN itself
// still allocates a little inside each call: it copies the argument list into a hash map and
// makes an execution context (a few small blocks, freed before it returns; the data and its
// scratchpad are ours).
void run_onednn(char kind, float* c, const bf16* a, const bf16* b, const float* bias, int M, int N, int K, int lda,
                int ldb, int ldc, float alpha, float beta) {
    const bool nested = omp_in_parallel();
    const Key key{kind, M, N, K, lda, ldb, ldc, alpha, beta, bias != nullptr, nested ? 1 : omp_get_max_threads()};
    Product* p = find_product(key);
    static thread_local dnnl::stream stream(engine());  // this thread's own, as its products
    dnnl_memory_set_data_handle_v2(p->src.get(), const_cast<bf16*>(a), stream.get());
    dnnl_memory_set_data_handle_v2(p->wei.get(), const_cast<bf16*>(b), stream.get());
    dnnl_memory_set_data_handle_v2(p->dst.get(), c, stream.get());
    if (bias) dnnl_memory_set_data_handle_v2(p->bias.get(), const_cast<float*>(bias), stream.get());
    const dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, p->src.get()},
                                    {DNNL_ARG_WEIGHTS, p->wei.get()},
                                    {DNNL_ARG_DST, p->dst.get()},
                                    {DNNL_ARG_SCRATCHPAD, p->scratch.get()},
                                    {DNNL_ARG_BIAS, bias ? p->bias.get() : nullptr}};
    const dnnl_status_t s = dnnl_primitive_execute(p->prim.get(), stream.get(), bias ? 5 : 4, args);
    check(s == dnnl_success, "oneDNN's bf16 matmul failed (status {})", int(s));
    dnnl_stream_wait(stream.get());
}
}  // namespace
#endif

// kind: 'T' for nt (b transposed), 'N' for nn, 't' for tn (a transposed).
static void matmul_bf16(char kind, float* c, const bf16* a, const bf16* b, int M, int N, int K, int lda, int ldb,
                        int ldc, float alpha, float beta) {
#ifdef HANDGRAD_ONEDNN
    if (matmul_bf16_backend() == Bf16Backend::OneDNN)
        return run_onednn(kind, c, a, b, nullptr, M, N, K, lda, ldb, ldc, alpha, beta);
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
#ifdef HANDGRAD_ONEDNN
    if (matmul_bf16_backend() == Bf16Backend::OneDNN)
        return run_onednn('T', c, a, b, bias, M, N, K, lda, ldb, ldc, 1.0f, 0.0f);
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

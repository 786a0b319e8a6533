// onednn_matmul.cpp — see onednn_matmul.h.
#include "lib/kernels/onednn_matmul.h"

#ifdef HANDGRAD_ONEDNN
#include <omp.h>

#include <cstdint>
#include <memory>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "lib/core/errors.h"

namespace hg {
namespace {
using dims = dnnl::memory::dims;
using dt = dnnl::memory::data_type;

// Everything a primitive is made for. (The calling thread is not part of it: each thread has a
// list of its own. Keying by the thread's number in its parallel region would not do: a batch
// thread running attention's parallel loop is alone in that nested team, number 0 in each
// replica, and two replicas would race on one product's pointers.)
struct Key {
    bool ta, tb;
    int M, N, K, lda, ldb, ldc;
    float alpha, beta;
    bool bias;
    int threads;
    bool operator==(const Key& o) const {
        return ta == o.ta && tb == o.tb && M == o.M && N == o.N && K == o.K && lda == o.lda &&
               ldb == o.ldb && ldc == o.ldc && alpha == o.alpha && beta == o.beta && bias == o.bias &&
               threads == o.threads;
    }
};

struct Product {
    Key key;
    dnnl::matmul prim;
    dnnl::memory src, wei, dst, bias, scratch;
    std::vector<uint8_t> scratch_buf;  // the primitive's scratchpad, ours (user mode)
    float alpha = 1;                   // what the scale memory below points at
    dnnl::memory scale;                // oneDNN 3, alpha ≠ 1: a one-number memory over alpha
};

dnnl::engine& engine() {
    static dnnl::engine e(dnnl::engine::kind::cpu, 0);
    return e;
}

// a (M,K) and b (K,N) as oneDNN reads them: the strides say which way each is stored.
std::unique_ptr<Product> make_product(const Key& k) {
    const dnnl::memory::dim M = k.M, N = k.N, K = k.K;
    // a stored (K,M) when transposed: element (m,k) at k·lda + m; else at m·lda + k
    const dnnl::memory::desc a_md(dims{M, K}, dt::bf16, k.ta ? dims{1, k.lda} : dims{k.lda, 1});
    // b stored (N,K) when transposed: element (k,n) at n·ldb + k; else at k·ldb + n
    const dnnl::memory::desc b_md(dims{K, N}, dt::bf16, k.tb ? dims{1, k.ldb} : dims{k.ldb, 1});
    const dnnl::memory::desc c_md(dims{M, N}, dt::f32, dims{k.ldc, 1});
    const dnnl::memory::desc bias_md(dims{1, N}, dt::f32, dims{N, 1});  // one row, added to every row of c
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (k.beta != 0.0f) {  // c = product + beta·c
        dnnl::post_ops ops;
        ops.append_sum(k.beta);
        attr.set_post_ops(ops);
    }
    auto p = std::make_unique<Product>();
    p->key = k, p->alpha = k.alpha;
    // alpha scales the product, not c's old value. oneDNN 2 takes it as a fixed output scale;
    // oneDNN 3 as a scale of the source, one number for the whole matrix (mask 0), read from a
    // memory passed with each call.
#if DNNL_VERSION_MAJOR >= 3
    if (k.alpha != 1.0f) attr.set_scales_mask(DNNL_ARG_SRC, 0);
    const dnnl::matmul::primitive_desc pd =
        k.bias ? dnnl::matmul::primitive_desc(engine(), a_md, b_md, bias_md, c_md, attr)
               : dnnl::matmul::primitive_desc(engine(), a_md, b_md, c_md, attr);
    if (k.alpha != 1.0f) p->scale = dnnl::memory({dims{1}, dt::f32, dims{1}}, engine(), &p->alpha);
#else
    if (k.alpha != 1.0f) attr.set_output_scales(0, {k.alpha});
    const dnnl::matmul::primitive_desc pd(
        k.bias ? dnnl::matmul::desc(a_md, b_md, bias_md, c_md) : dnnl::matmul::desc(a_md, b_md, c_md), attr, engine());
#endif
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
    products.push_back(make_product(k));
    return products.back().get();
}
}  // namespace

// Through oneDNN's C interface, with the arguments on the stack.
void onednn_matmul_bf16(bool ta, bool tb, float* c, const bf16* a, const bf16* b, const float* bias, int M, int N,
                        int K, int lda, int ldb, int ldc, float alpha, float beta) {
    const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    Product* p = find_product(Key{ta, tb, M, N, K, lda, ldb, ldc, alpha, beta, bias != nullptr, threads});
    static thread_local dnnl::stream stream(engine());  // this thread's own, as its products
    dnnl_memory_set_data_handle(p->src.get(), const_cast<bf16*>(a));
    dnnl_memory_set_data_handle(p->wei.get(), const_cast<bf16*>(b));
    dnnl_memory_set_data_handle(p->dst.get(), c);
    dnnl_exec_arg_t args[6] = {{DNNL_ARG_SRC, p->src.get()},
                               {DNNL_ARG_WEIGHTS, p->wei.get()},
                               {DNNL_ARG_DST, p->dst.get()},
                               {DNNL_ARG_SCRATCHPAD, p->scratch.get()}};
    int n_args = 4;
    if (bias) {
        dnnl_memory_set_data_handle(p->bias.get(), const_cast<float*>(bias));
        args[n_args++] = {DNNL_ARG_BIAS, p->bias.get()};
    }
#if DNNL_VERSION_MAJOR >= 3
    if (p->scale) args[n_args++] = {DNNL_ARG_ATTR_SCALES | DNNL_ARG_SRC, p->scale.get()};
#endif
    const dnnl_status_t s = dnnl_primitive_execute(p->prim.get(), stream.get(), n_args, args);
    check(s == dnnl_success, "oneDNN's matmul failed (status {})", int(s));
    dnnl_stream_wait(stream.get());
}

}  // namespace hg
#endif

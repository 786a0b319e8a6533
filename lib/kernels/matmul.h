// matmul.h — the one place the products go through: OpenBLAS's cblas_sgemm, oneDNN's matmul primitive,
// or our own Highway sgemm (lib/kernels/gemm.h).
//
// Three products cover every matmul of a transformer, forward and backward. The names say
// which operand is transposed; all matrices are row-major with explicit leading dimensions
// (row strides), so a head's slice of a (B, T, 3C) buffer is passed without copying.
//
//   matmul_nt:  c(M,N) = alpha * a(M,K) · b(N,K)ᵀ + beta * c    (x·Wᵀ, q·kᵀ)
//   matmul_nn:  c(M,N) = alpha * a(M,K) · b(K,N)   + beta * c    (dout·W, att·v)
//   matmul_tn:  c(M,N) = alpha * a(K,M)ᵀ · b(K,N)  + beta * c    (doutᵀ·inp)
//
// beta = 0 overwrites c (an input's gradient, attention's scores); beta = 1 adds the product
// into c (a parameter's gradient, a bias copied into c first, attention's dk and dv summed over
// row blocks). The layers' scalar twins do the same math as plain loops, so the libraries' calls
// have no twin of their own; our gemm has one (gemm.h).
//
// Three backends compute them, one per process at a time (matmul_use; set it before a run, never
// while products are running): OpenBLAS (always there), oneDNN (built in when its headers were
// found, HANDGRAD_ONEDNN) and Highway (gemm.h, always there). All sum in f32 and agree to float
// rounding, not to the bit: each tiles K in its own order. Each is deterministic for one CPU,
// one thread setting and the same library (Highway: the same SIMD target): a run repeats itself
// bit for bit with any backend, never across them. All run single-threaded inside our own
// parallel regions (attention's heads, batch threads) and split a product over the process's
// threads outside them (OpenBLAS by its own plan, oneDNN and Highway by blocks of rows or
// columns of c, matmul.cpp). OpenBLAS and Highway allocate nothing through C++'s operator new
// in a step (OpenBLAS takes a workspace from malloc when it threads a product, which glibc
// serves from its free lists once the first step has warmed them; Highway packs on the stack);
// oneDNN makes a few small blocks inside every call (onednn_matmul.h says which and how big).
#pragma once
#include <string>
#include <vector>

namespace hg {

void matmul_nt(float* c, const float* a, const float* b, int M, int N, int K,
               int lda, int ldb, int ldc, float alpha, float beta);
void matmul_nn(float* c, const float* a, const float* b, int M, int N, int K,
               int lda, int ldb, int ldc, float alpha, float beta);
void matmul_tn(float* c, const float* a, const float* b, int M, int N, int K,
               int lda, int ldb, int ldc, float alpha, float beta);

enum class MatmulBackend { OpenBLAS, OneDNN, Highway };
std::string to_string(MatmulBackend b);       // "openblas" | "onednn" | "highway"
MatmulBackend parse_matmul_backend(const std::string& s);  // hg::Error naming anything else
bool matmul_available(MatmulBackend b);       // oneDNN: only when built in
std::vector<MatmulBackend> matmul_backends(); // the available ones, OpenBLAS first, Highway last
// Which backend the products use from now on (hg::Error if it is not built in).
void matmul_use(MatmulBackend b);
MatmulBackend matmul_current();

// One product as a layer called it: which form, its sizes, its strides, beta, and whether it
// ran inside one of our parallel regions (then single-threaded, side by side with others).
struct MatmulCall {
    char form = 'n';  // 'n' = nn, 't' = nt, 'T' = tn
    int M = 0, N = 0, K = 0, lda = 0, ldb = 0, ldc = 0;
    float beta = 0;
    bool nested = false;
    long count = 0;  // how many times the recorded work made this call
    bool same_call(const MatmulCall& o) const;
};
// While `sink` is set, every product is also appended to it (merged with an equal call by its
// count); nullptr stops recording. For calibration only: recording takes a lock per product.
void matmul_record(std::vector<MatmulCall>* sink);
// Runs `call` once (alpha 1) with the current backend on the given buffers.
void matmul_run(const MatmulCall& call, float* c, const float* a, const float* b);

}  // namespace hg

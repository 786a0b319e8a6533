// matmul.h — the one place the products go through: OpenBLAS's cblas_sgemm, oneDNN's dnnl_sgemm,
// or our own Highway sgemm (lib/kernels/gemm.h).
//
// Every operand is a Mat: a row-major matrix as it is stored, {data, rows, cols, ld}, row r at
// data + r·ld. The leading dimension ld is the row stride (ld ≥ cols), so a head's (T, hs) slice
// of a (B·T, 3C) buffer is {q, T, hs, 3C}, passed without copying. A call names each operand's
// shape: matmul_tn({dv, t1, hs, 3C}, {P, rows, t1, T}, {dout, rows, hs, C}, 1, 1) reads
// "dv (t1, hs) += P (rows, t1)ᵀ · dout (rows, hs)". Three products cover every matmul of a
// transformer, forward and backward; the name says which operand is used transposed:
//
//   matmul_nt(c, a, b):  c (M,N) = alpha · a (M,K) · b (N,K)ᵀ + beta · c    x·Wᵀ, q·kᵀ
//   matmul_nn(c, a, b):  c (M,N) = alpha · a (M,K) · b (K,N)  + beta · c    dout·W, P·v
//   matmul_tn(c, a, b):  c (M,N) = alpha · a (K,M)ᵀ · b (K,N) + beta · c    doutᵀ·inp
//
// The operands' shapes must agree as written (asserted). beta = 0 overwrites c (an input's
// gradient, attention's scores); beta = 1 adds the product into c (a parameter's gradient, a
// bias copied into c first, attention's dk and dv summed over row blocks). The layers' scalar
// twins do the same math as plain loops, so the libraries' calls have no twin of their own; our
// gemm has one (gemm.h).
//
// Three backends compute them, one per process at a time (matmul_use; set it before a run, never
// while products are running): OpenBLAS (always there), oneDNN (built in when its headers were
// found, HANDGRAD_ONEDNN) and Highway (gemm.h, always there). All sum in f32 and agree to float
// rounding, not to the bit: each tiles K in its own order. Each is deterministic for one CPU,
// one thread setting and the same library (Highway: the same SIMD target): a run repeats itself
// bit for bit with any backend, never across them. All run single-threaded inside our own
// parallel regions (attention's heads, batch threads) and split a product over the process's
// threads outside them, each by the same plan of blocks of c and runs of K, one single-threaded
// call per part (matmul_split.h). OpenBLAS and Highway allocate nothing through C++'s operator
// new in a step after the first (the split's partial sums of K and our gemm's packed block grow
// once, in the first; OpenBLAS may take a workspace from malloc, which glibc serves from its free
// lists once the first step has warmed them); oneDNN 3's sgemm makes a few blocks of a few bytes
// inside every call (oneDNN 2's none: tests/test_alloc.cpp bounds them).
#pragma once
#include <cassert>
#include <string>
#include <vector>

namespace hg {

// A row-major matrix in a buffer, as it is stored: rows × cols numbers, row r at data + r·ld.
template <typename T>
struct Mat {
    T* data;
    int rows, cols;
    int ld;  // the row stride, in numbers: ≥ cols
    operator Mat<const T>() const { return {data, rows, cols, ld}; }
};

// The three forms, one name each: which operand is used transposed (above).
enum class MatmulForm { NT, NN, TN };
const char* to_string(MatmulForm f);  // "nt" | "nn" | "tn"

// The shapes a form needs, as the table above writes them: c (M,N); nt: a (M,K), b (N,K);
// nn: a (M,K), b (K,N); tn: a (K,M), b (K,N).
template <typename A, typename B>
bool matmul_shapes_agree(MatmulForm f, Mat<float> c, Mat<A> a, Mat<B> b) {
    const int M = c.rows, N = c.cols, K = f == MatmulForm::TN ? a.rows : a.cols;
    const bool a_ok = f == MatmulForm::TN ? a.cols == M : a.rows == M;
    const bool b_ok = f == MatmulForm::NT ? b.rows == N && b.cols == K : b.rows == K && b.cols == N;
    return a_ok && b_ok && a.ld >= a.cols && b.ld >= b.cols && c.ld >= c.cols;
}

void matmul_nt(Mat<float> c, Mat<const float> a, Mat<const float> b, float alpha, float beta);
void matmul_nn(Mat<float> c, Mat<const float> a, Mat<const float> b, float alpha, float beta);
void matmul_tn(Mat<float> c, Mat<const float> a, Mat<const float> b, float alpha, float beta);

enum class MatmulBackend { OpenBLAS, OneDNN, Highway };
std::string to_string(MatmulBackend b);       // "openblas" | "onednn" | "highway"
MatmulBackend parse_matmul_backend(const std::string& s);  // hg::Error naming anything else
bool matmul_available(MatmulBackend b);       // oneDNN: only when built in
std::vector<MatmulBackend> matmul_backends(); // the available ones, OpenBLAS first, Highway last
// Which backend the products use from now on (hg::Error if it is not built in).
void matmul_use(MatmulBackend b);
MatmulBackend matmul_current();

// One product as a layer called it: which form, its sizes, its strides, beta, the threads of
// the parallel region of ours it ran in (then single-threaded, side by side with as many
// others; 1: outside any, split over the process's threads), and whether its inputs are bf16
// (matmul_bf16.h).
struct MatmulCall {
    MatmulForm form = MatmulForm::NN;
    int M = 0, N = 0, K = 0, lda = 0, ldb = 0, ldc = 0;
    float beta = 0;
    int team = 1;
    long count = 0;  // how many times the recorded work made this call
    bool bf16 = false;
    bool nested() const { return team > 1; }
    bool same_call(const MatmulCall& o) const;      // the same in everything but the count
    bool same_but_team(const MatmulCall& o) const;  // the same in everything but the count and the team
};
// While `sink` is set, every product, float or bf16, is also appended to it (merged with an
// equal call by its count); nullptr stops recording. With compute = false the recorded products
// are not computed (their outputs keep what they held): what is left of the work is everything
// else, for timing that on its own. For calibration only: recording takes a lock per product.
void matmul_record(std::vector<MatmulCall>* sink, bool compute = true);
// Runs a float `call` once (alpha 1) with the current backend on the given buffers.
void matmul_run(const MatmulCall& call, float* c, const float* a, const float* b);

// For matmul_bf16.cpp: notes a bf16 product while recording is on, and says whether to compute
// it (false while recording without computing).
bool matmul_note_bf16(MatmulForm form, int M, int N, int K, int lda, int ldb, int ldc, float beta);
// For matmul_bf16.cpp: the float product of widened bf16 inputs, as matmul_nt/nn/tn computes it
// but not recorded (the bf16 call was).
void matmul_widened(MatmulForm form, Mat<float> c, Mat<const float> a, Mat<const float> b, float alpha, float beta);

}  // namespace hg

// probe.h — read-only looks inside a model, for the numbers the course texts print about one:
//
//   residual_norms   ‖H⁽ˡ⁾‖ along depth (Lesson 14's "open-loop gain" of the block cascade),
//                    read from the activations the last forward pass kept: no extra forward.
//   head_circuits    a head's QK circuit W_Q W_Kᵀ and OV circuit W_V W_O (Elhage et al. 2021;
//                    Step 5's "going further"), formed in double from the weights.
//   singular_values  a one-sided Jacobi SVD in double, to read those circuits' numerical rank,
//                    which can be at most the head size C/NH.
#pragma once
#include <vector>

#include "lib/model/gpt.h"

namespace hg {

// Frobenius norms of the residual stream of batch row b of the last forward pass: entry 0 is
// the embeddings H⁽⁰⁾ (T, C), entry l the output of block l, l = 1..L. Size L + 1.
template <typename real>
std::vector<double> residual_norms(const GPT<real>& model, int b = 0);

// Multiplies both projections that write into the residual stream (attn.c_proj and mlp.c_proj,
// weights and biases) by `factor`: the lesson's "residual-branch outputs scaled by 1/√(2N)"
// applied to weights already drawn.
template <typename real>
void scale_residual_branches(GPT<real>& model, double factor);

// A dense row-major matrix in double.
struct Matrix {
    int rows = 0, cols = 0;
    std::vector<double> a;  // (rows, cols)
    double& at(int i, int j) { return a[size_t(i) * cols + j]; }
    double at(int i, int j) const { return a[size_t(i) * cols + j]; }
};

// The two circuits of head `head` in block `layer`, both (C, C), in the row-vector convention
// the model computes in (a token's stream x is a row; y = x·Wᵀ for an nn.Linear weight W):
//   W_Q, W_K, W_V (hs, C): the head's rows of c_attn's Q, K and V blocks
//   W_O (C, hs):           the head's columns of attn.c_proj
//   QK = W_Qᵀ W_K   so the score of query x against key y is x · QK · yᵀ (before 1/√hs)
//   OV = W_Vᵀ W_Oᵀ  so a key y attended with weight 1 writes y · OV into the stream
// Each is a product through hs = C/NH dimensions: rank ≤ hs.
struct HeadCircuits {
    Matrix qk;  // (C, C)
    Matrix ov;  // (C, C)
};
HeadCircuits head_circuits(const GPT<float>& model, int layer, int head);

// All min(rows, cols) singular values of a, largest first (one-sided Jacobi, Hestenes 1958:
// rotate pairs of columns until all are orthogonal; the column norms are then the singular
// values). Accurate to a few ulps of σ_max in double.
std::vector<double> singular_values(const Matrix& a);

// How many singular values exceed rtol · σ_max (0 for a zero matrix).
int numerical_rank(const std::vector<double>& sigma, double rtol = 1e-10);

}  // namespace hg

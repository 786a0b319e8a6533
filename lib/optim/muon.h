// muon.h — Muon: momentum, then the update orthogonalised, for the blocks' weight matrices;
// AdamW (adamw.h) for everything else (embeddings, the head, every 1-D tensor).
//
// One Muon step for a weight W (rows, cols) with gradient G, momentum buffer M and μ:
//
//   M ← μ·M + G                          heavy-ball momentum
//   U = G + μ·M                          Nesterov: the gradient plus the look-ahead
//   O = NS₅(U / (‖U‖_F + eps))           ≈ the orthogonal factor of U (below)
//   W ← W·(1 − lr·wd) − lr · s · O       decoupled weight decay, as AdamW's; s the shape rule
//
// Why orthogonalise. Write U = P Σ Qᵀ (SVD). The gradient of a weight matrix is typically close
// to low rank: a few directions carry almost all of its norm, so a plain step moves W mostly
// along them. O = P Qᵀ keeps the directions and sets every singular value to 1, so rare but
// useful directions get as large a step as the dominant ones. (It is the steepest descent under
// the spectral norm, Bernstein & Newhouse 2024.)
//
// Why Newton–Schulz computes it. For X = P Σ Qᵀ,  X Xᵀ X = P Σ³ Qᵀ  and  (X Xᵀ)² X = P Σ⁵ Qᵀ,
// so the step
//     X ← a·X + b·(X Xᵀ) X + c·(X Xᵀ)² X        (a, b, c) = (3.4445, −4.7750, 2.0315)
// keeps P and Q and maps each singular value on its own through the odd polynomial
//     φ(σ) = a·σ + b·σ³ + c·σ⁵.
// Dividing by ‖U‖_F ≥ σ_max first puts every σ in [0, 1]. φ(0) = 0 and φ'(0) = a = 3.44: small
// singular values grow ~3.4× per step, and on [~0.7, 1.2] φ oscillates around 1 instead of
// converging to it (the coefficients trade exactness for speed: a cubic Newton–Schulz converges
// to exactly 1 but needs far more steps from small σ). Five steps of φ, computed for this header
// in exact arithmetic over σ ∈ [1e-6, 1]:
//     σ ≥ 0.005 · ‖U‖_F  →  φ⁵(σ) ∈ [0.68, 1.16]      (the band; tests/test_muon.cpp checks it
//                                                     with lib/probe's Jacobi SVD)
//     σ = 0              →  0                          (a rank-deficient U stays so)
// and σ in between come out in (0, 1.2]. So O = P φ⁵(Σ) Qᵀ ≈ P Qᵀ. Only products: sgemm.
//
// The iteration runs on the wide orientation: when rows > cols, on Uᵀ (cols, rows) and the
// result is transposed back; then X Xᵀ is (min, min), the cheaper Gram matrix. Singular values
// and φ are the same either way.
//
// The shape rule s = 0.2 · sqrt(max(rows, cols)). O has min(rows, cols) singular values ≈ 1, so
// ‖O‖_F² ≈ min(rows, cols) and its RMS per element is ≈ 1/sqrt(max(rows, cols)); s brings that
// to 0.2, about the RMS of an AdamW update (m̂/sqrt(v̂) is ±1 where gradients are consistent,
// smaller where they are noise). So Muon's lr is on AdamW's scale and AdamW's weight decay means
// the same thing for both groups; a Muon lr search starts at the AdamW lr. (The other common
// rule, sqrt(max(1, rows/cols)), makes the RMS 1/sqrt(cols) and needs lrs ~10× larger.)
//
// Memory: the momentum of a Muon matrix lives in AdamW's first-moment arena m at the matrix's
// own offset (AdamW never touches those elements), so checkpoints carry it as optim.m.<name>
// with no new format; its second-moment v stays 0. The Newton–Schulz scratch is one arena sized
// in build(), a slot per thread for the largest matrix (Muon below): a step allocates nothing.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "lib/core/tensor.h"
#include "lib/model/gpt.h"
#include "lib/optim/adamw.h"

namespace hg {

enum class OptimizerKind { AdamW, Muon };
OptimizerKind parse_optimizer(const std::string& s);  // "adamw" | "muon"; hg::Error otherwise
std::string to_string(OptimizerKind k);

struct MuonConfig {
    float lr = 0;                // peak lr of the Muon group; 0: learning_rate. It follows the same
                                 // schedule: lr_muon(t) = lr · lr_at(t) / learning_rate
    float momentum = 0.95f;      // μ
    int momentum_warmup = 0;     // μ ramps linearly from kMuonMomentumStart to μ over this many steps; 0: none
    void validate() const;       // throws hg::Error naming the bad value
};
constexpr float kMuonMomentumStart = 0.85f;  // the ramp's start (modded-nanogpt's value)

// The μ of step `iter` (0-based) under the warmup.
float muon_momentum_at(const MuonConfig& c, int iter);

// The coefficients, exposed so a test can plant a wrong one and see the band check fail.
struct NsCoefficients {
    double a = 3.4445, b = -4.7750, c = 2.0315;
};

// Newton–Schulz on the (a, b) row-major matrix x, a <= b: normalises x by its Frobenius norm and
// applies `steps` steps of the quintic above. x holds the result at the end. scratch holds at
// least newton_schulz_scratch(a, b) numbers. float runs on sgemm (lib/kernels/matmul.h); double on plain
// loops (the scalar twin, for the crosscheck's double run).
template <typename real>
void newton_schulz(real* x, int a, int b, real* scratch, int steps = 5);
size_t newton_schulz_scratch(int a, int b);  // a·b + 2·a²

// The same iteration with bf16 products (lib/kernels/matmul_bf16.h), for --dtype=bfloat16: each
// step rounds X, A = X Xᵀ and P = b·A + c·A² to bf16 before the product that reads them, and sums
// in float; the iterate X itself, a·X and the sum X' = a·X + P·X stay float. scratch holds
// newton_schulz_scratch(a, b) floats, scratch16 newton_schulz_scratch(a, b) bf16 numbers.
//
// Why bf16 is enough here. Rounding an input to bf16 moves each element by at most 2⁻⁸ of
// itself, independently from element to element. To first order a singular value σᵢ = pᵢᵀ X qᵢ
// of a product's result moves by pᵢᵀ E qᵢ = Σ θⱼₖ xⱼₖ pᵢⱼ qᵢₖ for the rounding E = θ∘X: a sum of
// a·b independent zero-mean terms, of standard deviation ≤ 2⁻⁸/√3 · max|xⱼₖ| (the θ uniform in
// ±2⁻⁸, Σ pᵢⱼ² qᵢₖ² = 1). Every σ stays ≤ 1.2 through the iteration, so max|xⱼₖ| ≤ 1.2, max|Aⱼₖ|
// ≤ 1.44 and max|Pⱼₖ| ≤ 2.8 (the eigenvalues of P are b·σ² + c·σ⁴ ∈ [−2.8, 0]). Weighted by where
// each rounding enters the step (X through ψ(σ) = b·σ³ + c·σ⁵, |ψ'| ≤ 5.05 on [0, 1.2]; A through
// c·A²·X, 2c·σ³; P through P·X, σ), one step's shift has a standard deviation of at most
//     2⁻⁸/√3 · √((5.05·1.2)² + (2·2.03·1.2³·1.44)² + (2.8·1.2)²) ≈ 7.1 · 2⁻⁸ ≈ 0.028,
// and far less in practice (the elements of a normalised 128 × 384 matrix are ~0.05, not 1.2).
// The iteration does not carry such errors along: in exact arithmetic φ maps [0.65, 1.2] into
// [0.68, 1.16] (its minimum there is 0.681 near σ = 1.05, its maximum 1.163 at 0.65), so a σ
// that an earlier step's rounding moved by ~0.03 is put back into the band by the next step,
// and a small σ still growing only follows the path of a slightly different σ. What is left is
// the last step's own shift: the band with its edges moved by that one-step amount,
// [0.68 − 0.03, 1.16 + 0.03] (tests/test_muon_bf16.cpp checks that). What bf16
// does change: an input singular value far below 2⁻⁸ · ‖U‖_F (a zero one, in a rank-deficient U)
// is lost in the rounding noise, which the iteration then grows like any small σ (the momentum
// of a trained weight is full rank in practice, so this is rarely a direction that matters).
void newton_schulz_bf16(float* x, int a, int b, float* scratch, bf16* scratch16, int steps = 5,
                        const NsCoefficients& k = {});

template <typename real>
void newton_schulz(real* x, int a, int b, real* scratch, int steps, const NsCoefficients& k);

// One weight matrix that Muon trains: its place in the parameter arena and its shape.
struct MuonMatrix {
    size_t offset;
    int rows, cols;
};

// Does Muon train this tensor? A linear layer's weight (role Weight) inside a block (component
// Attention or MLP): not the embeddings, the head, biases or norms.
bool muon_trains(const TensorSpec& t);

// The tensor table cut into the two optimizers' groups: Muon's matrices (empty for AdamW) and
// AdamW's spans (every other tensor, with its decay flag: adamw_span, lib/optim/adamw.h).
struct OptimizerGroups {
    std::vector<MuonMatrix> muon;
    std::vector<ParamSpan> adamw;
};
OptimizerGroups optimizer_groups(const std::vector<TensorSpec>& table, OptimizerKind kind);
// The groups as the header lines of a run: which optimizer, each group's tensors and sizes.
std::string describe_optimizer(const std::vector<TensorSpec>& table, OptimizerKind kind, const MuonConfig& muon,
                               const AdamWConfig& adamw);

// Muon over its matrices, with the Newton–Schulz scratch sized once.
//
// Threads. A wide matrix (a Newton–Schulz step of kWideFlops multiply-adds or more: GPT-2
// small's, the baby GPT's) runs alone, its products split over every thread (lib/kernels/
// matmul.h), so a model with fewer matrices than threads keeps them all busy. The others are
// split over the threads, each matrix's whole update (momentum, Newton–Schulz, the weight and
// its bf16 copy) on one thread with single-threaded products (every backend runs so inside our
// parallel regions): such matrices are small (192 × 768 for the speedrun), and one product
// split over threads costs more in handing out than it gains. build() deals them to slots by
// their Newton–Schulz FLOPs (4a²b + 2a³ a step), the largest first to the least loaded slot,
// one slot per thread the process has then (a slot left empty does nothing), each with its own
// scratch. A small matrix's numbers are computed by one thread in one fixed order, whichever
// thread and however many: they do not depend on the thread count (tests/test_muon_bf16.cpp
// checks 1, 2 and 3 threads). A wide one's products are split as the thread count says, so
// its bits are fixed for a thread setting, as every split product's.
constexpr double kWideFlops = double(1 << 28);

template <typename real>
struct Muon {
    std::vector<MuonMatrix> matrices;
    bool bf16_products = false;  // Newton–Schulz's products on bf16 inputs (newton_schulz_bf16), float only
    std::vector<int> wide;       // matrix indices of the wide ones, in table order
    int slots = 0;               // threads the other matrices are dealt to
    int used_slots = 0;          // slots with a matrix: the first ones
    std::vector<int> order;      // matrix indices, slot by slot: slot s has order[first[s] .. first[s+1])
    std::vector<int> first;
    size_t slot_size = 0, slot_size16 = 0;  // one slot's scratch: U (a·b) and newton_schulz_scratch; bf16's
    Arena<real> scratch;                    // used_slots × slot_size
    Arena<bf16> scratch16;                  // used_slots × slot_size16 (bf16_products only)

    // threads: the slots (0: omp_get_max_threads()). use_bf16: Newton–Schulz on bf16 products.
    void build(const std::vector<MuonMatrix>& m, bool use_bf16 = false, int threads = 0);
    // One step on every matrix: params (P), grads (P), momentum (P, at the same offsets). Every
    // Muon matrix is a 2-D weight, so every one decays (by lr·weight_decay, as AdamW's).
    // grad_scale multiplies each gradient as it is read: clip_scale's factor, as for AdamW
    // (lib/optim/adamw.h), so the gradient arena itself is never rescaled.
    // params16 (P) or null: the weights' bf16 copies, written as each weight is (lib/kernels/adamw.h).
    void step(real* params, const real* grads, real* momentum, double lr, double weight_decay, double mu,
              const NsCoefficients& k = {}, double grad_scale = 1, bf16* params16 = nullptr);

private:
    void update(const MuonMatrix& w, real* x, bf16* x16, real* params, const real* grads, real* momentum,
                double lr, double weight_decay, double mu, const NsCoefficients& k, double grad_scale,
                bf16* params16) const;
};

}  // namespace hg

// muon.cpp — see muon.h.
#include "lib/optim/muon.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include <omp.h>

#include "lib/core/errors.h"
#include "lib/core/parallel.h"
#include "lib/kernels/matmul.h"
#include "lib/kernels/matmul_bf16.h"

namespace hg {

OptimizerKind parse_optimizer(const std::string& s) {
    if (s == "adamw") return OptimizerKind::AdamW;
    if (s == "muon") return OptimizerKind::Muon;
    fail("optimizer must be adamw or muon (got '{}')", s);
}

std::string to_string(OptimizerKind k) { return k == OptimizerKind::Muon ? "muon" : "adamw"; }

void MuonConfig::validate() const {
    check(std::isfinite(lr) && lr >= 0, "muon_lr must be >= 0, 0 for learning_rate (got {})", lr);
    check(momentum >= 0 && momentum < 1, "muon_momentum must be in [0, 1) (got {})", momentum);
    check(momentum_warmup >= 0, "muon_momentum_warmup must be >= 0 (got {})", momentum_warmup);
}

float muon_momentum_at(const MuonConfig& c, int iter) {
    if (c.momentum_warmup <= 0 || iter >= c.momentum_warmup) return c.momentum;
    const float frac = float(iter) / float(c.momentum_warmup);
    return kMuonMomentumStart + frac * (c.momentum - kMuonMomentumStart);
}

size_t newton_schulz_scratch(int a, int b) { return size_t(a) * b + 2 * size_t(a) * a; }

namespace {

// The three products of a Newton–Schulz step, gram: g(a,a) = x xᵀ for x (a,b); square: q = p · p
// for p (a,a); mul_add: y(a,b) += p(a,a) · x(a,b). They run on sgemm for float and as plain
// loops for double.
void gram(float* g, const float* x, int a, int b) {
    matmul_nt({g, a, a, a}, {x, a, b, b}, {x, a, b, b}, 1.0f, 0.0f);
}
void square(float* q, const float* p, int a) { matmul_nn({q, a, a, a}, {p, a, a, a}, {p, a, a, a}, 1.0f, 0.0f); }
void mul_add(float* y, const float* p, const float* x, int a, int b) {
    matmul_nn({y, a, b, b}, {p, a, a, a}, {x, a, b, b}, 1.0f, 1.0f);
}

void gram(double* g, const double* x, int a, int b) {
    for (int i = 0; i < a; i++)
        for (int j = 0; j < a; j++) {
            double s = 0;
            for (int k = 0; k < b; k++) s += x[size_t(i) * b + k] * x[size_t(j) * b + k];
            g[size_t(i) * a + j] = s;
        }
}
void square(double* q, const double* p, int a) {
    for (int i = 0; i < a; i++)
        for (int j = 0; j < a; j++) {
            double s = 0;
            for (int k = 0; k < a; k++) s += p[size_t(i) * a + k] * p[size_t(k) * a + j];
            q[size_t(i) * a + j] = s;
        }
}
void mul_add(double* y, const double* p, const double* x, int a, int b) {
    for (int i = 0; i < a; i++)
        for (int k = 0; k < a; k++) {
            const double pik = p[size_t(i) * a + k];
            for (int j = 0; j < b; j++) y[size_t(i) * b + j] += pik * x[size_t(k) * b + j];
        }
}

// The products above, for the iteration below.
template <typename real>
struct Products {
    void gram(real* g, const real* x, int a, int b) { hg::gram(g, x, a, b); }
    void square(real* q, const real* p, int a) { hg::square(q, p, a); }
    void mul_add(real* y, const real* p, const real* x, int a, int b) { hg::mul_add(y, p, x, a, b); }
};

// The same three on bf16 inputs (newton_schulz_bf16, muon.h): each input rounded into its own
// bf16 block, the sums and the results in float. mul_add's x is the iterate gram rounded in the
// same step, so its rounding is reused.
struct Bf16Products {
    bf16* x16;     // (a, b) X rounded
    bf16* gm16;    // (a, a) A rounded
    bf16* poly16;  // (a, a) b·A + c·A² rounded
    void gram(float* g, const float* x, int a, int b) {
        bf16_round(x16, x, size_t(a) * b);
        matmul_bf16_nt({g, a, a, a}, {x16, a, b, b}, {x16, a, b, b}, 1.0f, 0.0f);
    }
    void square(float* q, const float* p, int a) {
        bf16_round(gm16, p, size_t(a) * a);
        matmul_bf16_nn({q, a, a, a}, {gm16, a, a, a}, {gm16, a, a, a}, 1.0f, 0.0f);
    }
    void mul_add(float* y, const float* p, const float* /* x: rounded by gram */, int a, int b) {
        bf16_round(poly16, p, size_t(a) * a);
        matmul_bf16_nn({y, a, b, b}, {poly16, a, a, a}, {x16, a, b, b}, 1.0f, 1.0f);
    }
};

// x /= (‖x‖_F + eps): σ_max <= ‖x‖_F, so every σ lands in [0, 1].
// ‖x‖²_F is summed in double in eight partial sums (element i into sum i mod 8), added up in a
// fixed order at the end: eight independent chains instead of one, in an order n alone fixes.
template <typename real>
void normalise(real* x, size_t n) {
    double part[8] = {};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) part[j] += double(x[i + j]) * double(x[i + j]);
    for (; i < n; i++) part[i % 8] += double(x[i]) * double(x[i]);
    const double sum = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
    const real inv = real(1.0 / (std::sqrt(sum) + 1e-7));
    for (i = 0; i < n; i++) x[i] *= inv;
}

// The iteration (muon.h), once for every way its products run.
template <typename real, typename P>
void iterate(real* x, int a, int b, real* scratch, int steps, const NsCoefficients& k, P products) {
    const size_t n = size_t(a) * b, aa = size_t(a) * a;
    normalise(x, n);
    real* y = scratch;         // (a, b) the next iterate
    real* gm = y + n;          // (a, a) A = X Xᵀ
    real* poly = gm + aa;      // (a, a) A², then b·A + c·A²
    real* cur = x;
    for (int s = 0; s < steps; s++) {
        products.gram(gm, cur, a, b);
        products.square(poly, gm, a);
        for (size_t i = 0; i < aa; i++) poly[i] = real(k.b) * gm[i] + real(k.c) * poly[i];
        for (size_t i = 0; i < n; i++) y[i] = real(k.a) * cur[i];
        products.mul_add(y, poly, cur, a, b);  // X' = a·X + (b·A + c·A²)·X
        std::swap(cur, y);
    }
    if (cur != x) std::memcpy(x, cur, n * sizeof(real));
}

}  // namespace

template <typename real>
void newton_schulz(real* x, int a, int b, real* scratch, int steps, const NsCoefficients& k) {
    iterate(x, a, b, scratch, steps, k, Products<real>{});
}

void newton_schulz_bf16(float* x, int a, int b, float* scratch, bf16* scratch16, int steps, const NsCoefficients& k) {
    const size_t n = size_t(a) * b, aa = size_t(a) * a;
    iterate(x, a, b, scratch, steps, k, Bf16Products{scratch16, scratch16 + n, scratch16 + n + aa});
}

template <typename real>
void newton_schulz(real* x, int a, int b, real* scratch, int steps) {
    newton_schulz(x, a, b, scratch, steps, NsCoefficients{});
}

bool muon_trains(const TensorSpec& t) {
    return t.role == Role::Weight && t.shape.ndim == 2 &&
           (t.component == Component::Attention || t.component == Component::MLP);
}

OptimizerGroups optimizer_groups(const std::vector<TensorSpec>& table, OptimizerKind kind) {
    if (kind == OptimizerKind::AdamW) return {{}, adamw_spans(table)};
    OptimizerGroups g;
    for (const TensorSpec& t : table) {
        if (muon_trains(t))
            g.muon.push_back({t.offset, int(t.shape.dims[0]), int(t.shape.dims[1])});
        else
            g.adamw.push_back(adamw_span(t));
    }
    return g;
}

std::string describe_optimizer(const std::vector<TensorSpec>& table, OptimizerKind kind, const MuonConfig& muon,
                               const AdamWConfig& adamw) {
    size_t muon_tensors = 0, muon_params = 0, adamw_tensors = 0, adamw_params = 0;
    std::vector<std::string> shapes;  // the Muon matrices' distinct shapes, in table order
    for (const TensorSpec& t : table) {
        if (kind == OptimizerKind::Muon && muon_trains(t)) {
            muon_tensors++, muon_params += t.shape.numel();
            if (std::find(shapes.begin(), shapes.end(), t.shape.str()) == shapes.end()) shapes.push_back(t.shape.str());
        } else {
            adamw_tensors++, adamw_params += t.shape.numel();
        }
    }
    std::string out = fmt::format("optimizer: {}\n", to_string(kind));
    if (kind == OptimizerKind::Muon) {
        std::string list;
        for (const std::string& s : shapes) list += (list.empty() ? "" : " ") + s;
        out += fmt::format("  muon:  {} tensors, {} parameters (the blocks' linear weights: {}); momentum {} "
                           "(warmup {}), lr {}, Newton–Schulz 5 steps\n",
                           muon_tensors, muon_params, list, muon.momentum, muon.momentum_warmup,
                           muon.lr > 0 ? fmt::format("{:g}", muon.lr) : std::string("= learning_rate"));
    }
    out += fmt::format("  adamw: {} tensors, {} parameters (beta1 {}, beta2 {}, weight decay {})\n", adamw_tensors,
                       adamw_params, adamw.beta1, adamw.beta2, adamw.weight_decay);
    return out;
}

template <typename real>
void Muon<real>::build(const std::vector<MuonMatrix>& m, bool use_bf16, int threads) {
    check(!use_bf16 || sizeof(real) == sizeof(float), "Muon's bf16 products need float weights");
    matrices = m, bf16_products = use_bf16;
    slots = std::max(1, threads > 0 ? threads : omp_get_max_threads());
    // The wide matrices run first, one after another; the others are dealt to the slots: the
    // largest Newton–Schulz first, each to the least loaded slot (the lowest on a tie), so the
    // split is the same on every run.
    std::vector<double> cost(matrices.size()), load(slots, 0.0);
    std::vector<int> by_cost, slot_of(matrices.size(), -1);
    size_t one = 0, one16 = 0;  // the largest matrix's scratch: U (a·b) and newton_schulz_scratch; bf16's
    wide.clear();
    for (size_t i = 0; i < matrices.size(); i++) {
        const int a = std::min(matrices[i].rows, matrices[i].cols), b = std::max(matrices[i].rows, matrices[i].cols);
        cost[i] = 4.0 * a * a * b + 2.0 * a * a * a;
        (cost[i] >= kWideFlops ? wide : by_cost).push_back(int(i));
        one = std::max(one, size_t(a) * b + newton_schulz_scratch(a, b));
        if (use_bf16) one16 = std::max(one16, newton_schulz_scratch(a, b));
    }
    std::stable_sort(by_cost.begin(), by_cost.end(), [&](int x, int y) { return cost[x] > cost[y]; });
    for (int i : by_cost) {
        const int s = int(std::min_element(load.begin(), load.end()) - load.begin());
        slot_of[i] = s, load[s] += cost[i];
    }
    order.clear(), first.assign(1, 0);
    for (int s = 0; s < slots; s++) {
        for (size_t i = 0; i < matrices.size(); i++)
            if (slot_of[i] == s) order.push_back(int(i));
        first.push_back(int(order.size()));
    }
    // Scratch for the slots that have a matrix (the first ones: the deal fills the lowest
    // empty slot first), and at least one, for the wide matrices.
    used_slots = 1;
    for (int s = 0; s < slots; s++)
        if (first[s + 1] > first[s]) used_slots = s + 1;
    slot_size = (one + 15) / 16 * 16;  // each slot on its own cache lines
    slot_size16 = (one16 + 31) / 32 * 32;
    scratch.allocate(size_t(used_slots) * slot_size);
    scratch16.allocate(size_t(used_slots) * slot_size16);
}

namespace {
// Calls f(i, j) for every element (r, c) of a rows × cols matrix, i = r·cols + c its place in
// the matrix and j its place in the iterate: i itself, or c·rows + r where the iterate is the
// transpose. Row by row, or, transposed, in 16 × 16 blocks, so that both sides stay within a few
// cache lines (row by row, the transposed side would touch a new line at every element). Each
// element's arithmetic is its own: the order changes no number.
template <class F>
void each_element(int rows, int cols, bool transposed, F&& f) {
    if (!transposed) {
        for (size_t i = 0; i < size_t(rows) * cols; i++) f(i, i);
        return;
    }
    constexpr int kBlock = 16;
    for (int r0 = 0; r0 < rows; r0 += kBlock)
        for (int c0 = 0; c0 < cols; c0 += kBlock)
            for (int c = c0; c < std::min(c0 + kBlock, cols); c++)
                for (int r = r0; r < std::min(r0 + kBlock, rows); r++)
                    f(size_t(r) * cols + c, size_t(c) * rows + r);
}
}  // namespace

template <typename real>
void Muon<real>::update(const MuonMatrix& w, real* x, bf16* x16, real* params, const real* grads, real* momentum,
                        double lr, double weight_decay, double mu, const NsCoefficients& k, double grad_scale,
                        bf16* params16) const {
    const real r_mu = real(mu), scale = real(grad_scale);
    const real keep = real(1.0 - lr * weight_decay);
    const int rows = w.rows, cols = w.cols;
    const bool flip = rows > cols;  // iterate on Uᵀ, the wide orientation
    const int a = flip ? cols : rows, b = flip ? rows : cols;
    real* p = params + w.offset;
    const real* g = grads + w.offset;
    real* buf = momentum + w.offset;
    each_element(rows, cols, flip, [&](size_t i, size_t j) {
        const real gi = g[i] * scale;  // the same bits as a gradient clipped in place
        buf[i] = r_mu * buf[i] + gi;
        x[j] = gi + r_mu * buf[i];
    });
    if constexpr (sizeof(real) == sizeof(float)) {
        if (bf16_products) newton_schulz_bf16(x, a, b, x + size_t(a) * b, x16, 5, k);
        else newton_schulz(x, a, b, x + size_t(a) * b, 5, k);
    } else {
        newton_schulz(x, a, b, x + size_t(a) * b, 5, k);
    }
    const real step = real(lr * 0.2 * std::sqrt(double(b)));  // lr · the shape rule s
    each_element(rows, cols, flip, [&](size_t i, size_t j) {
        p[i] = p[i] * keep - step * x[j];
        if (params16) params16[w.offset + i] = bf16_from_float(float(p[i]));  // the bf16 copy, in this pass
    });
}

template <typename real>
void Muon<real>::step(real* params, const real* grads, real* momentum, double lr, double weight_decay, double mu,
                      const NsCoefficients& k, double grad_scale, bf16* params16) {
    // The wide matrices: here, on the calling thread, their products split over every thread.
    for (int i : wide)
        update(matrices[i], scratch.data(), scratch16.data(), params, grads, momentum, lr, weight_decay, mu, k,
               grad_scale, params16);
    if (order.empty()) return;
    // Slot s's matrices run on thread s of the team when it has `slots` threads, and on thread
    // s mod n of a smaller one: which thread does not change a number (muon.h, "Threads").
    ParallelExceptions errors;  // an exception must not leave the region: rethrown after it
#pragma omp parallel num_threads(slots)
    {
        // One thread per product, in a team of one as well (where omp_in_parallel() is false and
        // the products would otherwise spread over the process's threads): this thread's own
        // setting, for this region only.
        omp_set_num_threads(1);
        const int t = omp_get_thread_num(), n = omp_get_num_threads();
        for (int s = t; s < slots; s += n)
            for (int j = first[s]; j < first[s + 1]; j++)
                errors.run(j, [&] {
                    update(matrices[order[j]], scratch.data() + size_t(s) * slot_size,
                           scratch16.data() + size_t(s) * slot_size16, params, grads, momentum, lr, weight_decay, mu,
                           k, grad_scale, params16);
                });
    }
    errors.rethrow();
}

template void newton_schulz<float>(float*, int, int, float*, int);
template void newton_schulz<double>(double*, int, int, double*, int);
template void newton_schulz<float>(float*, int, int, float*, int, const NsCoefficients&);
template void newton_schulz<double>(double*, int, int, double*, int, const NsCoefficients&);
template struct Muon<float>;
template struct Muon<double>;

}  // namespace hg

// test_bf16.cpp — bf16 rounding (the Highway kernel and its scalar twin on every SIMD target,
// at the cases that break a careless rounding) and the bf16 products against float and double.
#include "tests/catch.h"

#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

#include <omp.h>

#include "lib/core/rng.h"
#include "lib/kernels/bf16.h"
#include "lib/kernels/matmul_bf16.h"
#include "lib/kernels/simd.h"

using namespace hg;

static float from_bits(uint32_t b) {
    float x;
    std::memcpy(&x, &b, sizeof x);
    return x;
}

TEST_CASE("bf16 rounding: ties to even, subnormals, overflow, infinities, NaN", "[bf16]") {
    struct Case {
        uint32_t in;
        uint16_t out;
    };
    const Case cases[] = {
        {0x3F800000, 0x3F80},  // 1 exactly
        {0x3F808000, 0x3F80},  // tie, kept part even: stays
        {0x3F818000, 0x3F82},  // tie, kept part odd: up to even
        {0x3F807FFF, 0x3F80},  // just under the tie: down
        {0x3F808001, 0x3F81},  // just over: up
        {0xBF818000, 0xBF82},  // negative tie goes away from zero to even too
        {0x3F7FFFFF, 0x3F80},  // the carry runs into the exponent: 1 − 2⁻²⁴ → 1
        {0x00000000, 0x0000},  // +0
        {0x80000000, 0x8000},  // −0
        {0x00000001, 0x0000},  // the smallest subnormal rounds to 0
        {0x00008000, 0x0000},  // subnormal tie, even: down
        {0x00018000, 0x0002},  // subnormal tie, odd: up
        {0x00008001, 0x0001},  // subnormal over the tie: the smallest bf16 subnormal
        {0x807FFFFF, 0x8080},  // the largest subnormal rounds up to the smallest normal
        {0x7F7F7FFF, 0x7F7F},  // the largest bf16 stays finite just below its tie
        {0x7F7F8000, 0x7F80},  // the tie above bf16's largest (odd) rounds to +inf
        {0x7F7FFFFF, 0x7F80},  // float's largest: +inf
        {0xFF7FFFFF, 0xFF80},  // and −inf
        {0x7F800000, 0x7F80},  // +inf
        {0xFF800000, 0xFF80},  // −inf
        {0x7FC00000, 0x7FC0},  // quiet NaN
        {0x7F800001, 0x7FC0},  // signalling NaN with its payload in the dropped half: stays NaN, quiet
        {0xFFFFFFFF, 0xFFFF},  // NaN with every bit set: must not carry into inf or wrap
        {0x7FBF0000, 0x7FFF},  // signalling NaN with a payload in the kept half: payload kept, quiet
    };
    for (const Case& c : cases) {
        INFO("in 0x" << std::hex << c.in);
        CHECK(bf16_from_float(from_bits(c.in)) == c.out);
    }
    // The kernel on every target against the twin: the cases above, then many random bit
    // patterns (every class of float), at lengths that leave every tail length.
    std::vector<float> in;
    for (const Case& c : cases) in.push_back(from_bits(c.in));
    Rng rng(7);
    for (int i = 0; i < 5000; i++) in.push_back(from_bits(uint32_t(rng.next_u64())));
    for (int i = 0; i < 1000; i++) in.push_back(float(rng.normal()));
    for (const SimdTarget& t : simd_targets()) {
        simd_force_target(t.bits);
        INFO("target " << t.name);
        for (size_t n : {in.size(), size_t(1), size_t(17), size_t(33)}) {
            std::vector<bf16> out(n, 0x1234);
            bf16_round(out.data(), in.data(), n);
            size_t bad = 0;
            for (size_t i = 0; i < n; i++) bad += out[i] != bf16_from_float(in[i]);
            CHECK(bad == 0);
            std::vector<float> back(n);
            bf16_widen(back.data(), out.data(), n);
            for (size_t i = 0; i < n; i++) bad += float_bits(back[i]) != uint32_t(out[i]) << 16;
            CHECK(bad == 0);
        }
    }
    simd_force_target(0);
}

TEST_CASE("bf16 rounding is to nearest: the error is at most half a bf16 ulp, u = 2^-8 relative", "[bf16]") {
    Rng rng(3);
    for (int i = 0; i < 100000; i++) {
        const float x = float(rng.normal() * std::exp(10 * rng.normal()));
        if (!std::isfinite(x) || std::fabs(x) < FLT_MIN) continue;
        const double r = bf16_to_float(bf16_from_float(x));
        REQUIRE(std::fabs(r - x) <= std::ldexp(std::fabs(double(x)), -8));
    }
}

// The three products with bf16 inputs against the double products of the float inputs. Every
// entry is Σ_k a·b over K terms; rounding each input (relative error ≤ u = 2⁻⁸) changes each
// term by at most (2u + u²)·|a·b|, and the float sum adds at most K·ε·Σ|a·b| (ε = 2⁻²⁴ with
// ties, a generous γ_K). So |c − c_exact| ≤ ((2u + u²) + K·ε)·Σ_k |a·b|, checked per entry,
// and against the double product of the rounded inputs only the float sum's K·ε·Σ|a·b|.
namespace {
struct Operands {
    int M, N, K, lda, ldb, ldc;
    std::vector<float> a, b;
    std::vector<bf16> a16, b16;
};
}  // namespace

static void check_product(MatmulForm kind, int M, int N, int K, float beta) {
    const bool at = kind == MatmulForm::TN, bt = kind == MatmulForm::NT;
    const int a_rows = at ? K : M, a_cols = at ? M : K, b_rows = bt ? N : K, b_cols = bt ? K : N;
    const int lda = a_cols + 3, ldb = b_cols + 5, ldc = N + 2;  // slices, as attention's heads
    Rng rng(uint64_t(M * 131 + N * 7 + K));
    std::vector<float> a(size_t(a_rows) * lda), b(size_t(b_rows) * ldb), c0(size_t(M) * ldc);
    for (float& x : a) x = float(rng.normal());
    for (float& x : b) x = float(rng.normal());
    for (float& x : c0) x = float(rng.normal());
    std::vector<bf16> a16(a.size()), b16(b.size());
    bf16_round(a16.data(), a.data(), a.size());
    bf16_round(b16.data(), b.data(), b.size());
    auto A = [&](int m, int k) { return at ? size_t(k) * lda + m : size_t(m) * lda + k; };
    auto B = [&](int k, int n) { return bt ? size_t(n) * ldb + k : size_t(k) * ldb + n; };
    std::vector<float> c = c0;
    const Mat<float> c_m{c.data(), M, N, ldc};
    const Mat<const bf16> a_m{a16.data(), a_rows, a_cols, lda}, b_m{b16.data(), b_rows, b_cols, ldb};
    if (kind == MatmulForm::NT) matmul_bf16_nt(c_m, a_m, b_m, 1.0f, beta);
    if (kind == MatmulForm::NN) matmul_bf16_nn(c_m, a_m, b_m, 1.0f, beta);
    if (kind == MatmulForm::TN) matmul_bf16_tn(c_m, a_m, b_m, 1.0f, beta);
    const double u = std::ldexp(1.0, -8), eps = std::ldexp(1.0, -24);
    double worst_exact = 0, worst_rounded = 0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double exact = beta * c0[size_t(m) * ldc + n], rounded = exact, mag = std::fabs(exact);
            for (int k = 0; k < K; k++) {
                exact += double(a[A(m, k)]) * b[B(k, n)];
                rounded += double(bf16_to_float(a16[A(m, k)])) * bf16_to_float(b16[B(k, n)]);
                mag += std::fabs(double(a[A(m, k)]) * b[B(k, n)]);
            }
            const double got = c[size_t(m) * ldc + n];
            worst_exact = std::max(worst_exact, std::fabs(got - exact) / (((2 * u + u * u) + K * eps) * mag));
            worst_rounded = std::max(worst_rounded, std::fabs(got - rounded) / ((K + 1) * eps * 1.01 * mag));
        }
    INFO("kind " << to_string(kind) << " M " << M << " N " << N << " K " << K << " beta " << beta << ": " << worst_exact
                 << " and " << worst_rounded << " of the bounds");
    CHECK(worst_exact <= 1.0);
    CHECK(worst_rounded <= 1.0);
    // ldc's padding columns are never written
    for (int m = 0; m < M; m++)
        for (int n = N; n < ldc; n++) CHECK(c[size_t(m) * ldc + n] == c0[size_t(m) * ldc + n]);
}

TEST_CASE("bf16 products: within the bound of bf16's unit roundoff and K, float sums, beta 0 and 1", "[bf16]") {
    INFO(matmul_bf16_describe());
    for (bool widen : {false, true}) {
        matmul_bf16_force_widen(widen);
        for (MatmulForm kind : {MatmulForm::NT, MatmulForm::NN, MatmulForm::TN})
            for (float beta : {0.0f, 1.0f}) {
                check_product(kind, 37, 29, 300, beta);
                check_product(kind, 64, 96, 128, beta);
            }
    }
    matmul_bf16_force_widen(false);
}

// Subnormal numbers (below 2⁻¹²⁶ in magnitude). Rounding keeps them (the test above); the widening
// path multiplies them as float does, exactly; oneDNN's path runs the CPU's bf16 dot products
// (AVX512_BF16's vdpbf16ps, AMX's tdpbf16ps), which take subnormal inputs as zero and flush
// subnormal results to zero. So there the bound of the test above holds with an absolute term
// added: each term a·b with a subnormal factor may be lost whole (|a·b| < 2⁻¹²⁶·|other factor|),
// and the sum may be flushed (< 2⁻¹²⁶). Both paths are checked against that bound; the widening
// path must also keep the subnormal products exactly, and the run says what oneDNN did.
TEST_CASE("bf16 products with subnormal inputs: kept by the widening path, within the bound on both paths",
          "[bf16]") {
    const int M = 8, N = 8, K = 16;
    const float tiny = std::ldexp(1.0f, -126), sub = std::ldexp(1.0f, -130);  // sub: a subnormal bf16 exactly
    std::vector<float> a(size_t(M) * K), b(size_t(K) * N);
    Rng rng(7);
    for (size_t i = 0; i < a.size(); i++) a[i] = i % 3 == 0 ? sub * float(1 + rng.below(7)) : float(rng.normal());
    for (float& x : b) x = float(rng.normal());
    for (int k = 0; k < K; k++) a[k] = sub;  // row 0: every term has a subnormal factor
    std::vector<bf16> a16(a.size()), b16(b.size());
    bf16_round(a16.data(), a.data(), a.size());
    bf16_round(b16.data(), b.data(), b.size());
    const double u = std::ldexp(1.0, -8), eps = std::ldexp(1.0, -24);
    for (bool widen : {false, true}) {
        matmul_bf16_force_widen(widen);
        INFO(matmul_bf16_describe());
        std::vector<float> c(size_t(M) * N);
        matmul_bf16_nn({c.data(), M, N, N}, {a16.data(), M, K, K}, {b16.data(), K, N, N}, 1.0f, 0.0f);
        bool row0_kept = true;
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                double exact = 0, mag = 0, lost = tiny;  // lost: what flushing may take away
                for (int k = 0; k < K; k++) {
                    const double x = bf16_to_float(a16[size_t(m) * K + k]), y = bf16_to_float(b16[size_t(k) * N + n]);
                    exact += x * y, mag += std::fabs(x * y);
                    if (std::fabs(x) < tiny) lost += tiny * std::fabs(y);
                }
                const double got = c[size_t(m) * N + n];
                CHECK(std::fabs(got - exact) <= (2 * u + u * u + K * eps) * mag + lost);
                if (m == 0) row0_kept = row0_kept && std::fabs(got - exact) <= (K + 1) * eps * mag;
            }
        if (widen) CHECK(row0_kept);  // the float products keep subnormal terms
        else WARN(matmul_bf16_describe() << ": a row of subnormal terms " << (row0_kept ? "kept" : "flushed to zero"));
    }
    matmul_bf16_force_widen(false);
}

// Two batch threads, each inside a parallel loop of its own (one thread there, number 0 in both
// teams, as attention's loop is inside a replica), multiply their own operands at the same time:
// each must get its own product, bit for bit the one it got alone.
TEST_CASE("bf16 products from two threads at once, each in a nested parallel loop, stay each thread's own",
          "[bf16][threads]") {
    INFO(matmul_bf16_describe());
    const int M = 64, N = 64, K = 64;
    std::vector<bf16> a16[2], b16[2];
    for (int t = 0; t < 2; t++) {
        Rng rng(uint64_t(100 + t));
        std::vector<float> a(size_t(M) * K), b(size_t(N) * K);
        for (float& x : a) x = float(rng.normal());
        for (float& x : b) x = float(rng.normal());
        a16[t].resize(a.size()), b16[t].resize(b.size());
        bf16_round(a16[t].data(), a.data(), a.size());
        bf16_round(b16[t].data(), b.data(), b.size());
    }
    std::vector<float> alone[2];
    int wrong[2] = {0, 0}, threads = 0;
#pragma omp parallel num_threads(2)
    {
        const int t = omp_get_thread_num();
#pragma omp single
        threads = omp_get_num_threads();
        std::vector<float> c(size_t(M) * N);
        auto product = [&] {
#pragma omp parallel for
            for (int i = 0; i < 1; i++)
                matmul_bf16_nt({c.data(), M, N, N}, {a16[t].data(), M, K, K}, {b16[t].data(), N, K, K}, 1.0f, 0.0f);
        };
#pragma omp critical
        {
            product();  // alone: the other thread waits
            alone[t] = c;
        }
#pragma omp barrier
        for (int rep = 0; rep < 2000; rep++) {
            product();
            if (c != alone[t]) wrong[t]++;
        }
    }
    CHECK(threads == 2);
    CHECK(alone[0] != alone[1]);
    CHECK(wrong[0] == 0);
    CHECK(wrong[1] == 0);
}

TEST_CASE("bf16 products as recorded calls: recording notes each one, bf16, and skips it when asked; run from "
          "the record, a call computes what the layer's function does, each way", "[bf16][matmul]") {
    const int M = 24, N = 40, K = 72, ld = 80;
    Rng rng(5);
    std::vector<float> af(size_t(M) * ld), bf(size_t(N) * ld);
    for (float& x : af) x = float(rng.normal());
    for (float& x : bf) x = float(rng.normal());
    std::vector<bf16> a(af.size()), b(bf.size());
    bf16_round(a.data(), af.data(), af.size()), bf16_round(b.data(), bf.data(), bf.size());
    for (Bf16Backend way : matmul_bf16_backends()) {
        INFO(to_string(way));
        matmul_bf16_use(way);
        CHECK(matmul_bf16_backend() == way);
        std::vector<float> c(size_t(M) * ld, 7.0f), again = c;
        std::vector<MatmulCall> calls;
        matmul_record(&calls, /*compute=*/false);
        matmul_bf16_nt({c.data(), M, N, ld}, {a.data(), M, K, ld}, {b.data(), N, K, ld}, 1.0f, 1.0f);
        matmul_bf16_nt({c.data(), M, N, ld}, {a.data(), M, K, ld}, {b.data(), N, K, ld}, 1.0f, 1.0f);
        matmul_record(nullptr);
        CHECK(c == again);  // not computed
        REQUIRE(calls.size() == 1);
        const MatmulCall m = calls[0];
        CHECK((m.bf16 && m.form == MatmulForm::NT && m.M == M && m.N == N && m.K == K && m.count == 2));
        CHECK((m.lda == ld && m.ldb == ld && m.ldc == ld && m.beta == 1.0f && m.team == 1));
        matmul_bf16_nt({c.data(), M, N, ld}, {a.data(), M, K, ld}, {b.data(), N, K, ld}, 1.0f, 1.0f);
        matmul_bf16_run(m, again.data(), a.data(), b.data());
        CHECK(c == again);  // the same way, the same bits
        // Recording while computing: computed as well.
        matmul_record(&calls, /*compute=*/true);
        matmul_bf16_nt({c.data(), M, N, ld}, {a.data(), M, K, ld}, {b.data(), N, K, ld}, 1.0f, 1.0f);
        matmul_record(nullptr);
        CHECK(c != again);
    }
    matmul_bf16_force_widen(false);
    CHECK(matmul_bf16_backend() == matmul_bf16_backends().front());
    CHECK_THROWS_WITH(parse_bf16_backend("fast"), Catch::Contains("--matmul_bf16 must be auto, onednn or widen"));
    if (matmul_bf16_backends().size() == 1)
        CHECK_THROWS_WITH(matmul_bf16_use(Bf16Backend::OneDNN), Catch::Contains(matmul_bf16_no_onednn()));
}

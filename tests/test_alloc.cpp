// No heap allocation inside a training step: every buffer lives in an arena made up front.
// The test binary's operator new counts calls while `g_counting` is on.
#include "tests/catch.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>
#include <thread>

#include <omp.h>

#include "lib/core/thread_buffer.h"
#include "lib/kernels/matmul.h"
#include "lib/kernels/matmul_bf16.h"
#include "lib/layers/flash_attention.h"
#include "lib/model/generate.h"
#include "lib/train/trainer.h"
#include "tests/gradcheck.h"

// The global new and delete below are malloc and free underneath; GCC cannot see that they
// pair, and at -O1 warns where it inlines one into the other.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

static std::atomic<bool> g_counting{false};
static std::atomic<long> g_allocations{0};
static std::atomic<size_t> g_largest{0};  // the largest block asked for while counting

void* operator new(size_t n) {
    if (g_counting) g_allocations++, g_largest = std::max<size_t>(g_largest, n);
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void* operator new[](size_t n) { return operator new(n); }
// The nothrow forms too, so that every delete below frees memory this file's new allocated.
void* operator new(size_t n, const std::nothrow_t&) noexcept {
    if (g_counting) g_allocations++, g_largest = std::max<size_t>(g_largest, n);
    return std::malloc(n ? n : 1);
}
void* operator new[](size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

using namespace hg;

TEST_CASE("a training step allocates nothing on the heap (after the first)", "[train][alloc][muon]") {
    GPTConfig c = preset("course");
    c.dropout = 0.1f;  // the dropout paths too
    std::vector<int> ids(5000);
    Rng rng(2);
    for (int& t : ids) t = int(rng.below(c.vocab_size));
    std::vector<std::string> vocab(c.vocab_size, "x");
    GPTConfig modern = c;  // today's block: rmsnorm, rope, swiglu, qk_norm, softcap
    modern.norm = NormKind::RMSNorm, modern.pos = PosEncoding::Rope, modern.mlp = MlpKind::SwiGLU;
    modern.qk_norm = true, modern.logit_softcap = 30.0f;
    // the whole model on every thread; a replica per thread; Muon with its Newton–Schulz scratch;
    // with each matmul backend: OpenBLAS and Highway allocate nothing through operator new;
    // oneDNN 3's sgemm makes a few tiny blocks inside every call (4 bytes each with oneDNN 3.7;
    // oneDNN 2.6's makes none), which this counter sees: none of them may be a buffer of the
    // step's size, so each must be under 4 KiB.
    for (MatmulBackend backend : matmul_backends())
    for (const GPTConfig& config : {c, modern})
        for (auto [batch_threads, optimizer] : {std::pair{1, OptimizerKind::AdamW}, std::pair{2, OptimizerKind::AdamW},
                                                std::pair{1, OptimizerKind::Muon}}) {
            matmul_use(backend);
            INFO(to_string(backend) << ", batch_threads " << batch_threads << ", " << to_string(optimizer) << ", "
                                  << to_string(config.norm) << ", " << to_string(config.mlp));
            TrainConfig tc;
            tc.batch_size = 4, tc.batch_threads = batch_threads, tc.gradient_accumulation_steps = 2;
            tc.optimizer = optimizer, tc.muon.momentum_warmup = 5;
            tc.schedule = LrSchedule{1e-3, 1e-4, 2, 10, true};
            Trainer tr;
            tr.start(config, tc, vocab, ids, ids);
            tr.step();  // a first step may let OpenMP or BLAS set up their thread pools
            g_allocations = 0, g_largest = 0;
            g_counting = true;
            for (int i = 0; i < 3; i++) tr.step();
            g_counting = false;
            if (backend == MatmulBackend::OneDNN) {
                CHECK(g_largest < 4096);
                WARN(to_string(backend) << ": " << g_allocations / 3 << " allocations a step, the largest " << g_largest
                                        << " bytes");
            } else {
                CHECK(g_allocations == 0);
            }
            matmul_use(MatmulBackend::OpenBLAS);
        }
    // bf16 mixed precision. Widened to float (where the CPU has no bf16 dot products): nothing.
    // Through oneDNN's bf16 matmul primitive: a few small blocks inside every call (an argument
    // map and an execution context, lib/kernels/onednn_matmul.h), which this counter sees: none
    // of them may be a buffer of the step's size, so each must be under 4 KiB.
    for (bool widen : {true, false}) {
        matmul_bf16_force_widen(false);
        if (!widen && matmul_bf16_backend() != Bf16Backend::OneDNN) continue;  // no oneDNN here
        matmul_bf16_force_widen(widen);
        INFO("bf16, " << matmul_bf16_describe());
        TrainConfig tc;
        tc.batch_size = 4, tc.gradient_accumulation_steps = 2, tc.dtype = DType::BFloat16;
        tc.schedule = LrSchedule{1e-3, 1e-4, 2, 10, true};
        Trainer tr;
        tr.start(c, tc, vocab, ids, ids);
        tr.step();  // the first step grows the widening buffers and makes oneDNN's primitives
        g_allocations = 0, g_largest = 0;
        g_counting = true;
        for (int i = 0; i < 3; i++) tr.step();
        g_counting = false;
        if (widen) CHECK(g_allocations == 0);
        else CHECK(g_largest < 4096);
        WARN("bf16 through " << matmul_bf16_describe() << ": " << g_allocations / 3 << " allocations a step, the "
             "largest " << g_largest << " bytes");
    }
    matmul_bf16_force_widen(false);
    // the counter works: a vector allocates
    g_counting = true;
    std::vector<int> v(10);
    g_counting = false;
    CHECK(g_allocations > 0);
}

TEST_CASE("a generation step allocates nothing on the heap, with or without the KV cache", "[kvcache][sample][alloc]") {
    GPTConfig c = preset("course");
    c.block_size = 16;  // so that the steps below run past it: the cache is refilled
    GPT<float> model;
    gpt_build(model, c, 1, 1);
    gpt_init(model, 3);
    for (bool kv_cache : {true, false}) {
        INFO("kv_cache " << kv_cache);
        GenerateConfig gc;
        gc.num_samples = 3, gc.kv_cache = kv_cache;
        Generator g;
        g.start(model, gc, {1, 2, 3}, 40);
        g.step();  // a first step may let OpenMP or BLAS set up their thread pools
        g_allocations = 0;
        g_counting = true;
        for (int i = 1; i < 40; i++) g.step();
        g_counting = false;
        CHECK(g_allocations == 0);
    }
}

TEST_CASE("the flash attention layer allocates nothing on the heap (after the first call)", "[flash][alloc]") {
    const int B = 2, T = 70, C = 64, NH = 2;  // two row blocks and key tiles a head
    const auto qkv = test::randn<float>(size_t(B) * T * 3 * C, 1), dout = test::randn<float>(size_t(B) * T * C, 2);
    std::vector<float> out(dout.size()), lse(size_t(B) * NH * T), dqkv(qkv.size());
    std::vector<bf16> out16(out.size()), dqkv16(dqkv.size());
    const size_t n = std::max(flash_attention_scratch(T, C, NH), flash_attention_bf16_scratch(T, C, NH)) *
                     size_t(omp_get_max_threads());
    std::vector<float> scratch(n);
    const Dropout drop{0.2f, 5};
    auto run = [&] {
        flash_attention_forward(out.data(), lse.data(), scratch.data(), n, qkv.data(), B, T, C, NH, drop);
        flash_attention_backward(dqkv.data(), scratch.data(), n, dout.data(), qkv.data(), out.data(), lse.data(), B, T,
                                 C, NH, drop);
        for (FlashProducts products : {FlashProducts::Bf16Widened, FlashProducts::Bf16Dot}) {
            flash_attention_forward_bf16(out.data(), out16.data(), lse.data(), scratch.data(), n, qkv.data(), B, T, C,
                                         NH, drop, products);
            flash_attention_backward_bf16(dqkv.data(), dqkv16.data(), scratch.data(), n, dout.data(), qkv.data(),
                                          out16.data(), lse.data(), B, T, C, NH, drop, products);
        }
    };
    run();  // a first call may let OpenMP set up its threads
    g_allocations = 0;
    g_counting = true;
    run();
    g_counting = false;
    CHECK(g_allocations == 0);
}

namespace {
struct BufferOne;
struct BufferTwo;
}  // namespace

TEST_CASE("a thread's buffer is aligned, grows once, is its own for each name and each thread, and then "
          "allocates nothing", "[alloc]") {
    float* first = hg::thread_buffer<BufferOne>(1000);
    CHECK(reinterpret_cast<uintptr_t>(first) % 64 == 0);
    for (int i = 0; i < 1000; i++) first[i] = float(i);  // all of it is ours to write
    float* other = hg::thread_buffer<BufferTwo>(1000);
    CHECK(other != first);
    CHECK((other + 1000 <= first || first + 1000 <= other));  // no overlap
    g_allocations = 0, g_counting = true;
    float* again = hg::thread_buffer<BufferOne>(500);  // no more than before: the same buffer, no allocation
    g_counting = false;
    CHECK(again == first);
    CHECK(g_allocations == 0);
    float* grown = hg::thread_buffer<BufferOne>(100000);
    CHECK(reinterpret_cast<uintptr_t>(grown) % 64 == 0);
    g_allocations = 0, g_counting = true;
    CHECK(hg::thread_buffer<BufferOne>(100000) == grown);
    g_counting = false;
    CHECK(g_allocations == 0);
    // Another thread has a buffer of its own under the same name.
    float* elsewhere = nullptr;
    std::thread([&] { elsewhere = hg::thread_buffer<BufferOne>(10); }).join();
    CHECK(elsewhere != grown);
}

// Refusing a run the memory cannot hold (lib/model/memory_check.h): the need is what the arenas
// really allocate, and a run over the available memory is refused with the numbers and a
// batch size that fits.
#include "tests/catch.h"

#include <string>

#include "lib/model/memory_check.h"
#include "lib/train/trainer.h"

using namespace hg;

namespace {

GPTConfig small_config() {
    GPTConfig c;
    c.vocab_size = 20, c.block_size = 8, c.n_layer = 2, c.n_head = 2, c.n_embd = 16;
    return c;
}

}  // namespace

TEST_CASE("memory_need counts exactly the floats the trainer's arenas hold", "[robust][memory]") {
    const GPTConfig c = small_config();
    std::vector<int> ids(200);
    for (size_t i = 0; i < ids.size(); i++) ids[i] = int(i % 20);
    std::vector<std::string> vocab(20, "x");
    for (int R : {1, 2}) {
        INFO("batch threads " << R);
        TrainConfig tc;
        tc.batch_size = 4, tc.batch_threads = R, tc.eval_iters = 1;
        Trainer t;
        t.start(c, tc, vocab, ids, ids);
        // the default plan; each plan's count: tests/test_attention_plan.cpp
        const MemoryNeed need = memory_need(c, tc.batch_size, c.block_size, R, 3, false, tc.activations);
        CHECK(need.state_bytes == 4.0 * double(t.state_floats()));
        CHECK(need.activation_bytes == 4.0 * double(t.activation_floats()));
    }
}

TEST_CASE("a run over the available memory is refused with the numbers and a batch that fits", "[robust][memory]") {
    const GPTConfig c = small_config();
    const MemoryNeed need = memory_need(c, 64, 8, 1, 3);
    CHECK_NOTHROW(check_memory(need, need.total() / 0.9 + 1));
    CHECK(memory_fits(need, need.total() / 0.9 + 1));  // what --batch_threads=auto asks of each setting
    CHECK_FALSE(memory_fits(need, need.total() / 0.9 - 1));
    const double available = (need.state_bytes + need.activation_bytes / 2) / 0.9;  // about half the batch fits
    try {
        check_memory(need, available);
        FAIL("not refused");
    } catch (const Error& e) {
        const std::string what = e.what();
        INFO(what);
        CHECK(what.find("of activations for batch 64 × 8") != std::string::npos);
        CHECK(what.find("GiB available") != std::string::npos);
        const size_t at = what.find("try --batch_size=");
        REQUIRE(at != std::string::npos);
        const int suggested = std::stoi(what.substr(at + 17));
        CHECK(suggested >= 28);
        CHECK(suggested < 64);
        // the suggestion fits, one more row would not
        CHECK_NOTHROW(check_memory(memory_need(c, suggested, 8, 1, 3), available));
        CHECK_THROWS(check_memory(memory_need(c, suggested + 1, 8, 1, 3), available));
    }
    // Not even one row: a smaller model is the only way.
    CHECK_THROWS_WITH(check_memory(need, need.state_bytes), Catch::Contains("smaller model"));
    // Batch threads: the suggestion splits over them evenly.
    const MemoryNeed split = memory_need(c, 64, 8, 4, 3);
    try {
        check_memory(split, (split.state_bytes + split.activation_bytes / 2) / 0.9);
        FAIL("not refused");
    } catch (const Error& e) {
        const std::string what = e.what();
        INFO(what);
        REQUIRE(what.find("try --batch_size=") != std::string::npos);
        CHECK(std::stoi(what.substr(what.find("try --batch_size=") + 17)) % 4 == 0);
    }
}

TEST_CASE("sizes no machine holds are refused before any product can wrap", "[robust][memory]") {
    GPTConfig c = small_config();
    c.block_size = 100000000;
    const ActivationPlan materialized{AttentionKind::Materialized};  // its (B, NH, T, T) matrices
    CHECK_THROWS_WITH(memory_need(c, 1000, 100000000, 1, 3, false, materialized),
                      Catch::Contains("no machine holds that"));
    // flash attention keeps O(T) a row: the rows themselves then
    CHECK_THROWS_WITH(memory_need(c, 100000000, 100000000, 1, 3), Catch::Contains("no machine holds that"));
    CHECK_THROWS_WITH(memory_need(small_config(), 3, 8, 2, 3), Catch::Contains("split evenly"));
    const auto available = available_memory_bytes();
    REQUIRE(available.has_value());  // Linux: /proc/meminfo
    CHECK(*available > 0);
}

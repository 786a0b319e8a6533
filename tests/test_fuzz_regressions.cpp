// Every input of the fuzzers' seed corpora, tests/fuzz/<target>/, replayed through the same
// checks the fuzzers make (tests/fuzz/targets.h): the seeds, and each input that once broke
// something, kept there as it was found (its file name says what it broke).
#include "tests/catch.h"

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>

#include "tests/app_runner.h"
#include "tests/fuzz/targets.h"

using namespace hg;
namespace fs = std::filesystem;

namespace {

// Runs `target` on every file of tests/fuzz/<dir>; returns how many.
int replay(const std::string& dir, const std::function<void(const uint8_t*, size_t)>& target) {
    const fs::path corpus = fs::path("tests/fuzz") / dir;
    REQUIRE(fs::is_directory(corpus));  // the suite runs from the repository's root
    int n = 0;
    for (const fs::directory_entry& e : fs::directory_iterator(corpus)) {
        const std::string bytes = test::read_bytes(e.path());
        INFO(e.path().string());
        CHECK_NOTHROW(target(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
        n++;
    }
    return n;
}

}  // namespace

TEST_CASE("the fuzzers' corpora replay cleanly: checkpoints, texts, flags, token files", "[robust][fuzz]") {
    CHECK(replay("checkpoint", fuzz::checkpoint_bytes) >= 3);
    CHECK(replay("shards", fuzz::shard_bytes) >= 3);
    CHECK(replay("text", fuzz::text_bytes) >= 3);
    CHECK(replay("flags", fuzz::flag_bytes) >= 3);
}

TEST_CASE("the fuzzers' corpora replay cleanly: llm.c's model file", "[robust][fuzz][llmc]") {
    CHECK(replay("llmc", fuzz::llmc_model_bytes) >= 3);
}

TEST_CASE("the fuzzers' corpora replay cleanly: GPT-2's BPE", "[robust][fuzz][bpe]") {
    const char* dir = std::getenv("HANDGRAD_GPT2");
    if (!dir) {
        WARN("HANDGRAD_GPT2 is not set (make test sets it): skipped");
        return;
    }
    const Gpt2Tokenizer tok = Gpt2Tokenizer::load(dir);
    CHECK(replay("bpe", [&](const uint8_t* data, size_t size) { fuzz::bpe_bytes(tok, data, size); }) >= 3);
}

TEST_CASE("a config's integers are read exactly: no fraction, no wrap-around, no huge double", "[robust][fuzz]") {
    const std::string rest = R"(,"block_size":64,"n_layer":4,"n_head":4,"n_embd":128,"dropout":0.0,"bias":true,)"
                             R"("tie_weights":false})";
    CHECK(config_from_json(R"({"vocab_size":65)" + rest).vocab_size == 65);
    // 2^32 + 65 used to become 65, 65.9 to 65, and 1e300 an undefined conversion
    for (const char* v : {"4294967361", "65.9", "1e300", "-1e300", "18446744073709551616"})
        CHECK_THROWS_WITH(config_from_json(std::string(R"({"vocab_size":)") + v + rest),
                          Catch::Contains("vocab_size"));
    CHECK_THROWS_WITH(train_config_from_json(R"({"batch_size":1e300})"), Catch::Contains("batch_size"));
    CHECK_THROWS_WITH(train_config_from_json(R"({"max_iters":3.5})"), Catch::Contains("max_iters"));
    CHECK_THROWS_WITH(train_config_from_json(R"({"seed":-1})"), Catch::Contains("seed"));
    CHECK(train_config_from_json(R"({"seed":18446744073709551615})").seed == 18446744073709551615ull);
}

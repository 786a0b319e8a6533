// What the library assumes of the machine it runs on, checked on each (make test-arm64 runs
// this file under emulation too, docs/platforms.md):
//   - the SIMD targets: the binary dispatches to each one this CPU has, at the vector width
//     the target fixes; HANDGRAD_EXPECT_TARGETS (comma-separated names) and
//     HANDGRAD_EXPECT_SVE_BITS (set by make test-arm64) make the run fail unless each target is
//     there and SVE runs at that width, so an emulator or a build that silently lost SVE
//     cannot pass as an ARM run
//   - char's signedness (signed on x86-64, unsigned on ARM): bytes 0x80-0xFF, as char, must
//     give the same tokens and the same order either way
//   - the checkpoint's numbers are little-endian on disk, whatever the host
#include "tests/catch.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "lib/checkpoint/safetensors.h"
#include "lib/kernels/simd.h"
#include "lib/kernels/vec.h"
#include "lib/text/char_tokenizer.h"
#include "tests/app_runner.h"

using namespace hg;

namespace {

std::vector<std::string> split_commas(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string item; std::getline(ss, item, ',');)
        if (!item.empty()) out.push_back(item);
    return out;
}

}  // namespace

TEST_CASE("the SIMD targets: each one this CPU has is dispatched to, and the expected ones are there",
          "[simd][platform]") {
    const std::vector<SimdTarget> targets = simd_targets();
    REQUIRE(!targets.empty());
    std::string names, widths;
    for (const SimdTarget& t : targets) names += (names.empty() ? "" : " ") + t.name;
    INFO("targets, best first: " << names);
    CHECK(simd_current_target() == targets.front().name);  // normal dispatch takes the best
    const char* sve_bits = std::getenv("HANDGRAD_EXPECT_SVE_BITS");
    for (const SimdTarget& t : targets) {
        simd_force_target(t.bits);
        CHECK(simd_current_target() == t.name);
        // The vector width: fixed by the target, except on the width-agnostic SVE targets.
        const int bits = simd_vector_bits();
        INFO("target " << t.name << ": " << bits << "-bit vectors");
        widths += (widths.empty() ? "" : ", ") + t.name + " " + std::to_string(bits);
        if (t.name == "SVE" || t.name == "SVE2") {
            CHECK(bits % 128 == 0);
            CHECK(bits >= 128);
            CHECK(bits <= 2048);
            if (sve_bits) CHECK(bits == std::atoi(sve_bits));
        } else {
            const std::map<std::string, int> fixed = {
                {"AVX3", 512}, {"AVX3_DL", 512}, {"AVX2", 256},    {"SSE4", 128},     {"SSSE3", 128},
                {"SSE2", 128}, {"NEON", 128},    {"SVE_256", 256}, {"SVE2_128", 128}, {"EMU128", 128},
                {"SCALAR", 32}};
            if (fixed.count(t.name)) CHECK(bits == fixed.at(t.name));
        }
        // A kernel through dispatch on that target: 1 + 2 = 3 in every lane and the tail.
        std::vector<float> a(37, 1.0f), b(37, 2.0f);
        vec_add(a.data(), a.data(), b.data(), a.size());
        for (float x : a) CHECK(x == 3.0f);
    }
    simd_force_target(0);
    CHECK(simd_current_target() == targets.front().name);
    if (const char* expect = std::getenv("HANDGRAD_EXPECT_TARGETS")) {
        for (const std::string& want : split_commas(expect)) {
            INFO("expected SIMD target " << want);
            CHECK((" " + names + " ").find(" " + want + " ") != std::string::npos);
        }
        WARN("SIMD targets of this binary on this CPU, best first, with their vector bits: " << widths);
    }
}

TEST_CASE("bytes 0x80-0xFF as char: the same tokens and order whether char is signed or not",
          "[platform][tokenizer]") {
    // As signed chars these bytes are negative; a tokenizer that compared or indexed by char
    // would put them before '\n' on x86-64 and after '~' on ARM.
    const std::string text = "a\xC3\xA9z\n\xE2\x82\xAC~";  // a é z \n € ~
    const Tokenizer tok = Tokenizer::from_text(text);
    REQUIRE(tok.vocab == std::vector<std::string>{"\n", "a", "z", "~", "\xC3\xA9", "\xE2\x82\xAC"});
    CHECK(tok.encode(text) == std::vector<int>{1, 4, 2, 0, 5, 3});
    const std::vector<int> ids = tok.encode(text);
    CHECK(tok.decode(ids.data(), ids.size()) == text);
    // A byte above 0x7F that starts no character is rejected by its unsigned value.
    try {
        tok.encode("a\xFF");
        FAIL("0xFF was accepted");
    } catch (const Error& e) {
        CHECK(std::string(e.what()).find("0xFF") != std::string::npos);
    }
}

TEST_CASE("checkpoint numbers are little-endian on disk, whatever the host", "[platform][safetensors]") {
    test::TempDir dir("handgrad-platform");
    const std::string path = (dir.path / "t.safetensors").string();
    const float values[2] = {1.0f, -2.5f};  // 0x3F800000, 0xC0200000
    SafetensorsWriter w;
    w.add("x", Dtype::F32, {2}, values);
    w.save(path);
    const std::string bytes = test::read_bytes(path);
    REQUIRE(bytes.size() >= 8 + 8);
    uint64_t header = 0;
    for (int i = 7; i >= 0; i--) header = header << 8 | uint8_t(bytes[size_t(i)]);
    REQUIRE(bytes.size() == 8 + header + 8);
    const std::string data = bytes.substr(8 + header);
    CHECK(data == std::string("\x00\x00\x80\x3F\x00\x00\x20\xC0", 8));
    const SafetensorsFile f = SafetensorsFile::load(path);
    float back[2] = {0, 0};
    f.read_f32("x", {2}, back);
    CHECK(std::memcmp(back, values, sizeof values) == 0);
}

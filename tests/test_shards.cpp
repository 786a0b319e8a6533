// test_shards.cpp — token files: llm.c's shard format written and read back, every header
// field checked, nanoGPT's .bin, a view over files read as the vector it stands for (windows,
// batches, the evaluation), and each flawed file refused with one line naming it and the field.
#include "tests/catch.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "lib/core/errors.h"
#include "lib/data/dataset.h"
#include "lib/data/shards.h"
#include "tests/app_runner.h"

using namespace hg;
using namespace hg::test;
namespace fs = std::filesystem;

namespace {

// A shard's bytes: the header for tokens.size() tokens, then the tokens.
std::string shard_bytes(const std::vector<uint16_t>& tokens) {
    const std::vector<uint8_t> h = shard_header(tokens.size());
    std::string s(h.begin(), h.end());
    s.append(reinterpret_cast<const char*>(tokens.data()), 2 * tokens.size());
    return s;
}

void put_int(std::string& bytes, size_t field, int32_t v) { std::memcpy(&bytes[4 * field], &v, 4); }

std::vector<uint16_t> ramp(size_t n, int V, int from = 0) {
    std::vector<uint16_t> t(n);
    for (size_t i = 0; i < n; i++) t[i] = uint16_t((from + int(i) * 7) % V);
    return t;
}

// A char tokenizer.json of n tokens (U+0100, U+0101, ...).
std::string char_vocab_json(int n) {
    std::string v;
    for (int i = 0; i < n; i++) v += fmt::format("{}\"\\u{:04x}\"", i ? ", " : "", 0x100 + i);
    return R"({"tokenizer": "char", "vocab": [)" + v + "]}";
}

// open_token_data's error for `path`, or "" when it opened.
std::string open_error(const std::string& path) {
    try {
        open_token_data(path);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("shard: the header is llm.c's, and a written shard reads back its tokens", "[data][shards]") {
    const std::vector<uint8_t> h = shard_header(12345);
    REQUIRE(h.size() == 1024);
    int32_t f[4];
    std::memcpy(f, h.data(), sizeof f);
    CHECK(f[0] == 20240520);
    CHECK(f[1] == 1);
    CHECK(f[2] == 12345);
    CHECK(f[3] == 0);
    CHECK(std::all_of(h.begin() + 12, h.end(), [](uint8_t b) { return b == 0; }));

    TempDir tmp;
    const std::vector<uint16_t> tokens = ramp(1000, 50257);
    const std::string path = write_file(tmp.path / "x_train_000000.bin", shard_bytes(tokens));
    const TokenFile t = open_shard(path);
    REQUIRE(t.n == tokens.size());
    std::vector<int> got(t.n);
    TokenView::of_parts({t.part()}).copy(0, t.n, got.data());
    CHECK(std::equal(tokens.begin(), tokens.end(), got.begin()));
}

TEST_CASE("shard: each header field and the file's size are checked, naming the file and the field",
          "[data][shards][errors]") {
    TempDir tmp;
    const std::string good = shard_bytes(ramp(100, 65));
    struct Case {
        std::string name, bytes, phrase;
    };
    std::vector<Case> cases;
    std::string b = good;
    put_int(b, 0, 20240521);
    cases.push_back({"magic", b, "magic (header int 0) is 20240521"});
    b = good;
    put_int(b, 1, 2);
    cases.push_back({"version", b, "version (header int 1) is 2"});
    b = good;
    put_int(b, 2, 101);
    cases.push_back({"count-long", b, "token count (header int 2) is 101"});
    b = good;
    put_int(b, 2, 0);
    cases.push_back({"count-zero", b, "token count (header int 2) is 0"});
    b = good;
    put_int(b, 2, -5);
    cases.push_back({"count-negative", b, "token count (header int 2) is -5"});
    b = good;
    put_int(b, 200, 7);
    cases.push_back({"reserved", b, "header int 200 is 7"});
    cases.push_back({"truncated-tokens", good.substr(0, good.size() - 3), "truncated"});
    cases.push_back({"truncated-header", good.substr(0, 1000), "shorter than a shard's 1024-byte header"});
    cases.push_back({"empty", "", "shorter than a shard's 1024-byte header"});
    for (const Case& c : cases) {
        INFO(c.name);
        const std::string path = write_file(tmp.path / (c.name + "_val_000000.bin"), c.bytes);
        try {
            open_shard(path);
            FAIL("accepted");
        } catch (const Error& e) {
            const std::string what = e.what();
            CHECK(what.find(path) != std::string::npos);
            CHECK(what.find(c.phrase) != std::string::npos);
            CHECK(what.find('\n') == std::string::npos);
        }
    }
}

TEST_CASE("token data: a directory of shards, a glob of them, nanoGPT's directory; the splits in name order",
          "[data][shards]") {
    TempDir tmp;
    const fs::path dir = tmp.path / "shards";
    fs::create_directories(dir);
    const std::vector<uint16_t> a = ramp(300, 50257, 1), b = ramp(200, 50257, 2), v = ramp(150, 50257, 3);
    write_file(dir / "p_train_000001.bin", shard_bytes(b));  // written first, read second
    write_file(dir / "p_train_000000.bin", shard_bytes(a));
    write_file(dir / "p_val_000000.bin", shard_bytes(v));
    write_file(dir / "notes.txt", "not a shard");
    for (const std::string& path : {dir.string(), (dir / "p_*.bin").string()}) {
        INFO(path);
        const TokenData d = open_token_data(path);
        CHECK(d.format == "llm.c shards");
        CHECK(d.tokenizer.name == "gpt2");  // no tokenizer.json: GPT-2's ids, as llm.c's data
        REQUIRE(d.train.tokens() == 500);
        REQUIRE(d.val.tokens() == 150);
        std::vector<int> train(500);
        d.train.view.copy(0, 500, train.data());
        for (size_t i = 0; i < 300; i++) CHECK(train[i] == a[i]);
        for (size_t i = 0; i < 200; i++) CHECK(train[300 + i] == b[i]);
        // Read far past the hand-back threshold: the pages come back from the file each time.
        std::vector<int> w(60);
        for (size_t k = 0; k < 4000; k++) {
            const size_t at = (k * 37) % 440;
            d.train.view.copy(at, 60, w.data());
            REQUIRE(std::equal(w.begin(), w.end(), train.begin() + at));
        }
    }
    // llm.c's single-shard names; a name that only looks alike is no shard
    const fs::path single = tmp.path / "single";
    fs::create_directories(single);
    write_file(single / "tiny_shakespeare_train.bin", shard_bytes(a));
    write_file(single / "tiny_shakespeare_val.bin", shard_bytes(v));
    write_file(single / "notes_training.bin", "not a shard");
    write_file(single / "x_val_12a.bin", "not a shard");
    const TokenData s1 = open_token_data(single.string());
    CHECK(s1.train.paths.size() == 1);
    CHECK(s1.val.paths.size() == 1);
    CHECK(s1.val.tokens() == v.size());
    // nanoGPT: raw uint16, no header
    const fs::path nano = tmp.path / "nano";
    fs::create_directories(nano);
    write_file(nano / "train.bin", std::string(reinterpret_cast<const char*>(a.data()), 2 * a.size()));
    write_file(nano / "val.bin", std::string(reinterpret_cast<const char*>(v.data()), 2 * v.size()));
    const TokenData d = open_token_data(nano.string());
    CHECK(d.format == "nanoGPT");
    REQUIRE(d.train.tokens() == a.size());
    CHECK(d.train.view.at(17) == a[17]);
    CHECK(d.val.view.at(149) == v[149]);
}

TEST_CASE("token view: windows across shards are the windows of the concatenation; batches and the "
          "evaluation read a split in files as the vector it stands for", "[data][shards]") {
    TempDir tmp;
    const std::vector<uint16_t> a = ramp(97, 65, 1), b = ramp(5, 65, 2), c = ramp(130, 65, 3);
    std::vector<int> all(a.begin(), a.end());
    all.insert(all.end(), b.begin(), b.end());
    all.insert(all.end(), c.begin(), c.end());
    // Two shards on disk with an array in memory between them.
    const TokenFile fa = open_shard(write_file(tmp.path / "a_train_000000.bin", shard_bytes(a)));
    const TokenFile fc = open_shard(write_file(tmp.path / "c_train_000000.bin", shard_bytes(c)));
    const TokenView in_files = TokenView::of_parts({fa.part(), {b.data(), b.size(), nullptr, 0}, fc.part()});
    const TokenView in_memory(all);
    REQUIRE(in_files.size() == all.size());
    std::vector<int> x(40), y(40);
    for (size_t start = 0; start + 40 <= all.size(); start += 3) {
        in_files.copy(start, 40, x.data());
        in_memory.copy(start, 40, y.data());
        REQUIRE(x == y);
    }
    const int B = 8, T = 16;
    std::vector<int> idx_a(B * T), tg_a(B * T), idx_b(B * T), tg_b(B * T);
    Rng r1(42), r2(42);
    for (int it = 0; it < 50; it++) {
        sample_batch(idx_a.data(), tg_a.data(), in_files, B, T, r1);
        sample_batch(idx_b.data(), tg_b.data(), all, B, T, r2);
        REQUIRE(idx_a == idx_b);
        REQUIRE(tg_a == tg_b);
    }
    CHECK(in_files.same_as(in_files));
    CHECK_FALSE(in_files.same_as(in_memory));
}

TEST_CASE("token data: flawed sets are refused in one line naming the file", "[data][shards][errors]") {
    TempDir tmp;
    auto dir = [&](const std::string& name) {
        fs::create_directories(tmp.path / name);
        return tmp.path / name;
    };
    // a token id the tokenizer does not have
    const fs::path big = dir("big");
    std::vector<uint16_t> t = ramp(100, 65);
    write_file(big / "d_train_000000.bin", shard_bytes(t));
    t[42] = 65;
    write_file(big / "d_val_000000.bin", shard_bytes(t));
    write_file(big / "tokenizer.json", char_vocab_json(65));
    CHECK_THAT(open_error(big.string()), Catch::Contains("d_val_000000.bin: the token at position 42") &&
                                             Catch::Contains("is 65, outside the tokenizer's 65 ids"));
    // above GPT-2's 50,257
    const fs::path big2 = dir("big2");
    std::vector<uint16_t> g = ramp(100, 50257);
    write_file(big2 / "d_val_000000.bin", shard_bytes(g));
    g[99] = 50257;
    write_file(big2 / "d_train_000000.bin", shard_bytes(g));
    CHECK_THAT(open_error(big2.string()),
               Catch::Contains("d_train_000000.bin: the token at position 99") && Catch::Contains("50257"));

    CHECK_THAT(open_error(dir("empty").string()), Catch::Contains("holds no token files"));
    CHECK_THAT(open_error((tmp.path / "empty" / "*.bin").string()), Catch::Contains("no file matches"));
    const fs::path only_train = dir("only_train");
    write_file(only_train / "d_train_000000.bin", shard_bytes(ramp(50, 65)));
    CHECK_THAT(open_error(only_train.string()), Catch::Contains("no val split"));

    // two directories with different tokenizers under one glob
    const fs::path m1 = dir("mix/a"), m2 = dir("mix/b");
    write_file(m1 / "d_train_000000.bin", shard_bytes(ramp(50, 65)));
    write_file(m2 / "d_val_000000.bin", shard_bytes(ramp(50, 65)));
    write_file(m2 / "tokenizer.json", char_vocab_json(65));
    CHECK_THAT(open_error((tmp.path / "mix" / "*" / "*.bin").string()),
               Catch::Contains("mixes tokenizers: gpt2") && Catch::Contains("char (65 tokens)"));

    // nanoGPT: an odd size, a char-level directory without a vocabulary we can read
    const fs::path odd = dir("odd");
    write_file(odd / "train.bin", std::string(201, 'a'));
    write_file(odd / "val.bin", std::string(200, 'a'));
    CHECK_THAT(open_error(odd.string()), Catch::Contains("train.bin: 201 bytes, an odd number"));
    const fs::path pkl = dir("pkl");
    write_file(pkl / "train.bin", std::string(200, 'a'));
    write_file(pkl / "val.bin", std::string(200, 'a'));
    write_file(pkl / "meta.pkl", "\x80\x04");
    CHECK_THAT(open_error(pkl.string()), Catch::Contains("meta.pkl") && Catch::Contains("tools/nanogpt_meta.py"));

    // each file must hold a window
    const fs::path short_dir = dir("short");
    write_file(short_dir / "d_train_000000.bin", shard_bytes(ramp(100, 50257)));
    write_file(short_dir / "d_val_000000.bin", shard_bytes(ramp(16, 50257)));
    const TokenData s = open_token_data(short_dir.string());
    CHECK_NOTHROW(check_windows(s, 15));
    CHECK_THROWS_WITH(check_windows(s, 16),
                      Catch::Contains("d_val_000000.bin: 16 tokens; block_size 16 needs at least 17"));
}

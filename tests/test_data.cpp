// test_data.cpp — reading text, the code-point tokenizer, the train/val split, batches.
#include <unistd.h>

#include "tests/catch.h"
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "lib/core/errors.h"
#include "lib/data/dataset.h"
#include "lib/text/char_tokenizer.h"
#include "lib/text/text_file.h"
#include "tests/app_runner.h"

using Catch::Matchers::Contains;
using Catch::Matchers::Equals;
using namespace hg;
using hg::test::shakespeare_path;

namespace {

// A file in the temp directory, deleted at the end of the scope.
struct TempFile {
    std::string path;
    explicit TempFile(const std::string& name, const std::string& contents) {
        path = (std::filesystem::temp_directory_path() /
                ("handgrad_" + std::to_string(getpid()) + "_" + name))
                   .string();
        std::ofstream(path, std::ios::binary) << contents;
    }
    ~TempFile() { std::remove(path.c_str()); }
};

std::vector<int> iota_ids(int n) {
    std::vector<int> ids(n);
    for (int i = 0; i < n; i++) ids[i] = i;
    return ids;
}

}  // namespace

TEST_CASE("read_text_file: contents, missing, empty, directory", "[data]") {
    TempFile f("hello.txt", "hello\nworld\n");
    CHECK(read_text_file(f.path) == "hello\nworld\n");

    REQUIRE_THROWS_WITH(read_text_file("/nonexistent/x.txt"),
                        Equals("cannot read data file '/nonexistent/x.txt': No such file or directory"));
    TempFile empty("empty.txt", "");
    REQUIRE_THROWS_WITH(read_text_file(empty.path), Contains("is empty") && Contains(empty.path));
    REQUIRE_THROWS_WITH(read_text_file("/tmp"), Contains("cannot read data file '/tmp'"));
}

TEST_CASE("tokenizer on tiny Shakespeare: nanoGPT's 65 characters, round trip", "[data][tokenizer]") {
    std::string path = shakespeare_path();
    if (path.empty()) return;
    std::string text = read_text_file(path);
    REQUIRE(text.size() == 1115394);

    Tokenizer tok = Tokenizer::from_text(text);
    REQUIRE(tok.size() == 65);
    CHECK(tok.vocab[0] == "\n");
    CHECK(tok.vocab[1] == " ");
    CHECK(tok.vocab[2] == "!");
    CHECK(tok.vocab[64] == "z");
    // nanoGPT: chars = sorted(list(set(data))); for ASCII, sorted bytes.
    std::set<char> chars(text.begin(), text.end());
    std::vector<std::string> expected;
    for (char c : chars) expected.push_back(std::string(1, c));
    CHECK(tok.vocab == expected);

    std::vector<int> ids = tok.encode(text);
    REQUIRE(ids.size() == text.size());
    CHECK(ids[0] == tok.encode("F")[0]);  // "First Citizen:"
    CHECK(tok.decode(ids.data(), ids.size()) == text);

    // The vocabulary survives a save/load (from_vocab) unchanged.
    Tokenizer again = Tokenizer::from_vocab(tok.vocab);
    CHECK(again.encode(text) == ids);

    // nanoGPT's shakespeare_char split sizes.
    Split split = split_train_val(ids);
    CHECK(split.train.size() == 1003854);
    CHECK(split.val.size() == 111540);
    CHECK(std::equal(split.train.begin(), split.train.end(), ids.begin()));
    CHECK(std::equal(split.val.begin(), split.val.end(), ids.begin() + 1003854));
}

TEST_CASE("tokenizer: non-ASCII text gives one token per code point", "[data][tokenizer]") {
    const std::string text = "naïve café — ok";  // ï = C3 AF, é = C3 A9, — = E2 80 94
    Tokenizer tok = Tokenizer::from_text(text);
    // Sorted by code point: ' ' a c e f k n o v (ASCII), é U+00E9, ï U+00EF, — U+2014.
    std::vector<std::string> expected = {" ", "a", "c", "e", "f", "k", "n", "o", "v",
                                         "\xC3\xA9", "\xC3\xAF", "\xE2\x80\x94"};
    CHECK(tok.vocab == expected);

    std::vector<int> ids = tok.encode(text);
    CHECK(ids.size() == 15);  // 15 characters in 19 bytes
    CHECK(ids == std::vector<int>{6, 1, 10, 8, 3, 0, 2, 1, 4, 9, 0, 11, 0, 7, 5});
    CHECK(tok.decode(ids.data(), ids.size()) == text);

    // 4-byte characters (outside the Basic Multilingual Plane) too.
    const std::string emoji = "a\xF0\x9F\x98\x80" "b\xF0\x9F\x98\x80";  // a😀b😀
    Tokenizer t2 = Tokenizer::from_text(emoji);
    CHECK(t2.vocab == std::vector<std::string>{"a", "b", "\xF0\x9F\x98\x80"});
    std::vector<int> e_ids = t2.encode(emoji);
    CHECK(e_ids == std::vector<int>{0, 2, 1, 2});
    CHECK(t2.decode(e_ids.data(), e_ids.size()) == emoji);
}

TEST_CASE("tokenizer: characters outside the vocabulary are named with their offset",
          "[data][tokenizer]") {
    Tokenizer tok = Tokenizer::from_text("abcf ");
    REQUIRE_THROWS_WITH(tok.encode("ab café"),
                        Equals("character 'é' (U+00E9) at byte offset 6 is not in the vocabulary (5 tokens)"));
    REQUIRE_THROWS_WITH(tok.encode("a\tb"), Contains("character U+0009 at byte offset 1"));
    REQUIRE_THROWS_WITH(tok.encode("abz"), Contains("'z' (U+007A) at byte offset 2"));
    CHECK(tok.encode("").empty());
}

TEST_CASE("tokenizer: invalid UTF-8 is rejected with its byte offset", "[data][tokenizer]") {
    Tokenizer tok = Tokenizer::from_text("ab");
    const std::vector<std::pair<std::string, std::string>> bad = {
        {"ab\xFF" "a", "byte 0xFF at byte offset 2"},      // never valid in UTF-8
        {"a\x80", "byte 0x80 at byte offset 1"},           // continuation byte without a lead
        {"ab\xC3", "byte 0xC3 at byte offset 2"},          // truncated at the end
        {"\xC3(", "byte 0xC3 at byte offset 0"},           // lead byte, then not a continuation
        {"a\xC0\x80", "byte 0xC0 at byte offset 1"},       // overlong U+0000
        {"\xE0\x80\xAF", "byte 0xE0 at byte offset 0"},    // overlong '/'
        {"a\xED\xA0\x80", "byte 0xED at byte offset 1"},   // surrogate U+D800
        {"\xF4\x90\x80\x80", "byte 0xF4 at byte offset 0"},  // U+110000, above the last code point
    };
    for (const auto& [text, message] : bad) {
        INFO("text bytes: " << text.size());
        REQUIRE_THROWS_WITH(tok.encode(text), Contains("not valid UTF-8") && Contains(message));
        REQUIRE_THROWS_WITH(Tokenizer::from_text(text + "ab"), Contains(message));
    }
}

TEST_CASE("tokenizer: from_vocab validation and decode range", "[data][tokenizer]") {
    CHECK(Tokenizer::from_vocab({"\n", " ", "a", "\xC3\xA9"}).size() == 4);

    REQUIRE_THROWS_WITH(Tokenizer::from_vocab({}), Equals("the vocabulary is empty"));
    REQUIRE_THROWS_WITH(Tokenizer::from_vocab({"a"}), Contains("has 1 token; it needs at least 2"));
    REQUIRE_THROWS_WITH(Tokenizer::from_vocab({"a", "bc"}),
                        Contains("token 1 (\"bc\", 2 bytes) is not exactly one UTF-8 character"));
    REQUIRE_THROWS_WITH(Tokenizer::from_vocab({"", "a"}), Contains("token 0"));
    REQUIRE_THROWS_WITH(Tokenizer::from_vocab({"a", "\xC3"}), Contains("token 1"));
    REQUIRE_THROWS_WITH(Tokenizer::from_vocab({"a", "b", "b"}),
                        Equals("vocabulary tokens 1 and 2 are both 'b' (U+0062)"));
    REQUIRE_THROWS_WITH(Tokenizer::from_vocab({"a", "c", "b"}), Contains("not sorted by code point"));
    REQUIRE_THROWS_WITH(Tokenizer::from_text("aaaa"), Contains("only 1 distinct character"));
    REQUIRE_THROWS_WITH(Tokenizer::from_text(""), Contains("empty text"));

    Tokenizer tok = Tokenizer::from_vocab({"a", "b"});
    int ok[] = {1, 0, 1};
    CHECK(tok.decode(ok, 3) == "bab");
    int bad[] = {0, 2};
    REQUIRE_THROWS_WITH(tok.decode(bad, 2), Equals("token id 2 at position 1 is outside the vocabulary [0, 2)"));
    int negative[] = {-1};
    REQUIRE_THROWS_WITH(tok.decode(negative, 1), Contains("token id -1"));
}

TEST_CASE("split_train_val: first 90 % train, rest val", "[data]") {
    Split s = split_train_val(iota_ids(25));  // int(25 * 0.9) = int(22.5) = 22
    REQUIRE(s.train.size() == 22);
    REQUIRE(s.val.size() == 3);
    CHECK(s.train.front() == 0);
    CHECK(s.train.back() == 21);
    CHECK(s.val == std::vector<int>{22, 23, 24});

    CHECK(split_train_val(iota_ids(10), 0.5).train.size() == 5);
    CHECK(split_train_val(iota_ids(10), 1.0).val.empty());
    REQUIRE_THROWS_WITH(split_train_val(iota_ids(10), 0.0), Contains("train_fraction must be in (0, 1]"));
    REQUIRE_THROWS_WITH(split_train_val(iota_ids(10), 1.5), Contains("got 1.5"));
}

TEST_CASE("split_text: the cut falls after 90 % of the characters; char ids split the same way", "[data]") {
    // 10 characters, 3 of them multi-byte: the cut after int(10 * 0.9) = 9 characters is at a
    // byte offset no byte count would give.
    const std::string text = "ab\xC3\xA9" "cd\xE2\x82\xAC" "efg\xF0\x9F\x98\x80";
    const Tokenizer tok = Tokenizer::from_text(text);
    const Split by_text = split_text(text, tok);
    const Split by_ids = split_train_val(tok.encode(text));
    CHECK(by_text.train == by_ids.train);
    CHECK(by_text.val == by_ids.val);
    REQUIRE(by_text.val.size() == 1);
    CHECK(tok.decode(by_text.val.data(), 1) == "\xF0\x9F\x98\x80");
    CHECK(split_text(text, tok, 0.5).train.size() == 5);
    CHECK(split_text(text, tok, 1.0).val.empty());
    REQUIRE_THROWS_WITH(split_text(text, tok, 0.0), Contains("train_fraction must be in (0, 1]"));
}

TEST_CASE("split_text: a byte that is not UTF-8 counts as one character", "[data]") {
    // A tokenizer that gives one id per byte, so the cut can be read off the sizes.
    struct Bytes : TextTokenizer {
        std::vector<int> encode(std::string_view t) const override { return std::vector<int>(t.begin(), t.end()); }
        std::string decode(const int*, size_t) const override { return ""; }
        int size() const override { return 256; }
        std::string name() const override { return "bytes"; }
    };
    // 9 stray bytes and one 2-byte character: 10 characters, the cut after 9 is 9 bytes in.
    const std::string text = std::string(9, '\xFF') + "\xC3\xA9";
    const Split s = split_text(text, Bytes{});
    CHECK(s.train.size() == 9);
    CHECK(s.val.size() == 2);
}

TEST_CASE("sample_batch: windows of the data, targets shifted by one", "[data]") {
    const int B = 8, T = 16, len = 1000;
    // ids[i] = 7i + 3: every value names its position, so a window's start can be recovered.
    std::vector<int> ids(len);
    for (int i = 0; i < len; i++) ids[i] = 7 * i + 3;
    std::vector<int> idx(B * T), targets(B * T);
    Rng rng(1234);
    sample_batch(idx.data(), targets.data(), ids, B, T, rng);
    std::set<int> starts;
    for (int b = 0; b < B; b++) {
        int start = (idx[b * T] - 3) / 7;
        REQUIRE(start >= 0);
        REQUIRE(start <= len - T - 1);
        starts.insert(start);
        for (int t = 0; t < T; t++) {
            CHECK(idx[b * T + t] == ids[start + t]);
            CHECK(targets[b * T + t] == ids[start + t + 1]);
            if (t + 1 < T) CHECK(targets[b * T + t] == idx[b * T + t + 1]);
        }
    }
    CHECK(starts.size() > 1);  // random starts, not one window repeated

    // Same seed, same batch; another seed, another batch.
    std::vector<int> idx2(B * T), targets2(B * T);
    Rng same(1234);
    sample_batch(idx2.data(), targets2.data(), ids, B, T, same);
    CHECK(idx2 == idx);
    CHECK(targets2 == targets);
    Rng other(99);
    sample_batch(idx2.data(), targets2.data(), ids, B, T, other);
    CHECK(idx2 != idx);
}

TEST_CASE("sample_batch: every start in [0, len - T - 1] occurs, none beyond", "[data]") {
    const int T = 4, len = T + 3;  // starts 0, 1, 2
    std::vector<int> ids = iota_ids(len);
    std::vector<int> idx(T), targets(T);
    Rng rng(7);
    std::set<int> starts;
    for (int k = 0; k < 200; k++) {
        sample_batch(idx.data(), targets.data(), ids, 1, T, rng);
        starts.insert(idx[0]);
        REQUIRE(targets[T - 1] <= len - 1);
    }
    CHECK(starts == std::set<int>{0, 1, 2});

    // Exactly T + 1 tokens: one possible window.
    std::vector<int> tight = iota_ids(T + 1);
    sample_batch(idx.data(), targets.data(), tight, 1, T, rng);
    CHECK(idx == std::vector<int>{0, 1, 2, 3});
    CHECK(targets == std::vector<int>{1, 2, 3, 4});
}

TEST_CASE("sample_batch: a split shorter than block_size + 1 is an error", "[data]") {
    std::vector<int> ids = iota_ids(100);
    std::vector<int> idx(256), targets(256);
    Rng rng(1);
    REQUIRE_THROWS_WITH(sample_batch(idx.data(), targets.data(), ids, 1, 256, rng, "val"),
                        Equals("the val split has 100 tokens; block_size 256 needs at least 257"));
    REQUIRE_THROWS_WITH(sample_batch(idx.data(), targets.data(), ids, 1, 100, rng),
                        Equals("the split has 100 tokens; block_size 100 needs at least 101"));
    REQUIRE_THROWS_WITH(sample_batch(idx.data(), targets.data(), ids, 0, 8, rng),
                        Contains("batch_size (0)"));
}

TEST_CASE("eval_windows: non-overlapping windows i = 0, T, 2T, ... with i + T + 1 <= len", "[data]") {
    CHECK(eval_windows(10, 3) == 3);  // 0, 3, 6 (6 + 4 = 10)
    CHECK(eval_windows(9, 3) == 2);   // 0, 3
    CHECK(eval_windows(4, 3) == 1);
    CHECK(eval_windows(3, 3) == 0);
    CHECK(eval_windows(0, 3) == 0);
    CHECK(eval_windows(111540, 256) == 435);  // tiny Shakespeare's val split
    // Against the definition, counted one window at a time.
    for (size_t len = 0; len < 60; len++)
        for (int T = 1; T < 12; T++) {
            size_t count = 0;
            for (size_t i = 0; i + T + 1 <= len; i += T) count++;
            REQUIRE(eval_windows(len, T) == count);
        }
    REQUIRE_THROWS_WITH(eval_windows(10, 0), Contains("block_size must be positive"));
}

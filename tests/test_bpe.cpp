// test_bpe.cpp — GPT-2's tokenizer on GPT-2's own files: merges worked by hand, a table of tricky
// strings, tiny Shakespeare's token counts, "<|endoftext|>", and decode(encode(x)) == x for
// random byte strings. (Bad files and the merge order on vocabularies written to order:
// test_bpe_files.cpp.)
#include "tests/catch.h"

#include <string>
#include <vector>

#include "lib/core/errors.h"
#include "lib/core/rng.h"
#include "lib/data/dataset.h"
#include "lib/text/bpe.h"
#include "lib/text/text_file.h"
#include "lib/text/tokenizer_by_name.h"
#include "lib/text/utf8.h"
#include "tests/bpe_files.h"

using namespace hg;
using namespace hg::test;
using Catch::Matchers::Equals;

namespace {

std::string decode(const Gpt2Tokenizer& tok, const std::vector<int>& ids) { return tok.decode(ids.data(), ids.size()); }

// The ids are tools/bpe_reference.py's (`table`), an independent Python implementation on
// Python's `regex` module; the checks by hand are the comments.
struct Entry {
    std::string text;
    std::vector<int> ids;
};
const Entry kTable[] = {
    // Pieces "Hello", " world". " world" worked through vocab.bpe (rank = line - 2; line 1 is
    // "#version"): Ġ w o r l d; lowest pair "Ġ w" (rank 10) -> Ġw o r l d; "o r" (17) -> Ġw or l d;
    // "l d" (79; "Ġw or" is 220, "or l" none) -> Ġw or ld; "Ġw or" (220; "or ld" is 1508) -> Ġwor ld;
    // "Ġwor ld" (739) -> Ġworld, id 995.
    {"Hello world", {15496, 995}},
    // h e l l o: "h e" (rank 2) -> he l l o; "l l" (41; "he l" is 2722, "l o" 5183) -> he ll o;
    // "he ll" (12502; "ll o" is 18542) -> hell o; "hell o" (31117) -> hello, id 31373.
    {"hello", {31373}},
    {"I'm here, they're not; you'll see what's what.",
     {40, 1101, 994, 11, 484, 821, 407, 26, 345, 1183, 766, 644, 338, 644, 13}},
    // The contractions are lowercase only: "'S" is "'" (6) then "S" (50); " 'S" is " '" (705), "S".
    // " 'st": the space is not part of a contraction, so " '" (705) then "st" (301).
    {"IT'S HE'S 'S 'st", {2043, 6, 50, 11179, 6, 50, 705, 50, 705, 301}},
    {"don't DON'T", {9099, 470, 23917, 6, 51}},
    // \s+(?!\S) leaves the last space of a run to the next word: "a", " ", " b", " ", " ", " c"
    // (GPT-2 has no merge "Ġ Ġ": a run of spaces is one 220 per space).
    {"a  b   c", {64, 220, 275, 220, 220, 269}},
    {"trailing   ", {9535, 4386, 220, 220, 220}},
    // "\n\n" before a word is "\n", "\n" (198 each), not the token "\n\n" (628).
    {"line\n\nnext\n", {1370, 198, 198, 19545, 198}},
    {" \n \n", {220, 198, 220, 198}},
    {"  x", {220, 2124}},
    {"1234567 3.14159 2024", {10163, 2231, 3134, 513, 13, 1415, 19707, 48609}},
    {"x=1;y!=2?!...", {87, 28, 16, 26, 88, 0, 28, 17, 12248, 986}},
    {"Hello, \xd0\xbc\xd0\xb8\xd1\x80!", {15496, 11, 12466, 120, 18849, 21169, 0}},                          // Cyrillic
    {"\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c", {19526, 254, 25001, 121, 10310, 244, 45911, 234}},  // CJK
    {"\xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7", {25405, 26897, 148, 255, 39848, 12919}},                    // Arabic
    {"\xf0\x9f\x91\x8b\xf0\x9f\x8f\xbd", {41840, 233, 8582, 237, 121}},           // waving hand + skin tone
    {"\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7",  // family, joined by ZWJ
     {41840, 101, 447, 235, 41840, 102, 447, 235, 41840, 100}},
    {"cafe\xcc\x81 caf\xc3\xa9", {66, 8635, 136, 223, 40304}},  // e + combining acute, then é
    // Invalid UTF-8: each bad byte is a pre-token of its own, its single-byte token (0xFF is
    // spelled U+00FF, id 187), and the valid text around it is cut there.
    {"a\xff"
     "b",
     {64, 187, 65}},
    {"\xe2\x80 x\xc3", {158, 222, 2124, 127}},             // truncated sequences
    {"\xed\xa0\x80\xc0\xaf", {169, 254, 222, 124, 107}},   // an encoded surrogate, an overlong '/'
    {"<|endoftext|>", {27, 91, 437, 1659, 5239, 91, 29}},  // ordinary text for encode()
    // U+0085 (NEL) is white space to GPT-2's \s, U+180E is not (PCRE2's own \s says otherwise).
    {"\tTab\x0bvt\xc2\x85nel\xe1\xa0\x8emvs", {197, 33349, 199, 36540, 126, 227, 4954, 157, 254, 236, 76, 14259}},
    // " U+180E" is a symbol with its space (28053 254 236), " U+0085" a run of white space.
    {"a \xe1\xa0\x8ex \xc2\x85 y", {64, 28053, 254, 236, 87, 1587, 227, 331}},
    {"\xc2\xa0nbsp  \xe3\x80\x80ideo", {1849, 77, 24145, 220, 220, 5099, 222, 1651}},
};

}  // namespace

TEST_CASE("gpt2: the vocabulary and the byte alphabet", "[bpe]") {
    if (gpt2_dir().empty()) return;
    const Gpt2Tokenizer& tok = gpt2();
    CHECK(tok.name() == "gpt2");
    CHECK(tok.size() == 50257);
    CHECK(tok.end_of_text() == 50256);
    CHECK(tok.token(50256) == "<|endoftext|>");
    CHECK(tok.token(220) == " ");   // spelled "Ġ" (U+0120) in the files
    CHECK(tok.token(198) == "\n");  // "Ċ" (U+010A)
    CHECK(tok.token(628) == "\n\n");
    CHECK(tok.token(995) == " world");
    CHECK(spell(" ") == "\xc4\xa0");      // U+0120: the test's own table agrees
    CHECK(spell("\xad") == "\xc5\x83");   // U+0143, the last of the 68
    CHECK(spell("\x7f") == "\xc4\xa1");   // U+0121
    // All 256 bytes are tokens and each byte alone encodes to its own.
    for (int b = 0; b < 256; b++) {
        const std::vector<int> ids = tok.encode(std::string(1, char(b)));
        REQUIRE(ids.size() == 1);
        CHECK(tok.token(ids[0]) == std::string(1, char(b)));
    }
}

TEST_CASE("gpt2: the table of tricky strings", "[bpe]") {
    if (gpt2_dir().empty()) return;
    const Gpt2Tokenizer& tok = gpt2();
    for (const Entry& e : kTable) {
        INFO(fmt::format("{:?}", e.text));
        CHECK(tok.encode(e.text) == e.ids);
        CHECK(decode(tok, e.ids) == e.text);
    }
}

TEST_CASE("gpt2: <|endoftext|> is text for encode, id 50256 for encode_with_special", "[bpe]") {
    if (gpt2_dir().empty()) return;
    const Gpt2Tokenizer& tok = gpt2();
    const std::string doc = "a<|endoftext|>b<|endoftext|><|endoftext|>";
    CHECK(tok.encode_with_special(doc) == std::vector<int>{64, 50256, 65, 50256, 50256});
    // As text (tools/bpe_reference.py): "><" between the last two is one token (6927).
    CHECK(tok.encode(doc) == std::vector<int>{64, 27, 91, 437, 1659, 5239, 91, 29, 65, 27, 91, 437, 1659, 5239, 91,
                                              6927, 91, 437, 1659, 5239, 91, 29});
    CHECK(decode(tok, tok.encode(doc)) == doc);
    CHECK(decode(tok, tok.encode_with_special(doc)) == doc);
    CHECK(tok.encode_with_special("<|endoftext").size() > 1);  // only the whole text is special
    CHECK(tok.encode_with_special("").empty());
    CHECK(tok.encode("").empty());
}

TEST_CASE("gpt2: tiny Shakespeare split 90/10 by characters is 301,966 + 36,059 tokens", "[bpe]") {
    const char* data = std::getenv("HANDGRAD_DATA");
    if (gpt2_dir().empty()) return;
    if (!data || !*data) {
        WARN("HANDGRAD_DATA is not set: skipping the tiny Shakespeare counts");
        return;
    }
    const Gpt2Tokenizer& tok = gpt2();
    const std::string text = read_text_file(data);
    // nanoGPT's data/shakespeare/prepare.py: n = len(data) in code points, data[:int(n * 0.9)],
    // each part encoded on its own; build/train and build/eval split the same way.
    const Split split = split_text(text, tok);
    const std::vector<int>& train = split.train;
    const std::vector<int>& val = split.val;
    CHECK(train.size() == 301966);
    CHECK(val.size() == 36059);
    const std::vector<int> all = tok.encode(text);
    CHECK(decode(tok, all) == text);
}

TEST_CASE("gpt2: decode(encode(x)) == x for random byte strings", "[bpe]") {
    if (gpt2_dir().empty()) return;
    const Gpt2Tokenizer& tok = gpt2();
    Rng rng(21);
    // Bytes drawn from a mix that keeps the pre-tokenizer and the merges busy: ASCII letters,
    // digits, spaces, apostrophes, multi-byte characters, lone continuation and lead bytes, and
    // uniformly random bytes (mostly invalid UTF-8).
    const std::vector<std::string> atoms = {"a", "e", "t", "T", "s", "'", " ", "  ", "\n", "\t", "0", "7", ".", ",",
                                            "'s", "'ll", "\xc3\xa9", "\xd0\xbc", "\xe4\xbd\xa0", "\xf0\x9f\x91\x8b",
                                            "\xe2\x80\x8d", "\xcc\x81", "\xc2\x85", "\x80", "\xc3", "\xe2\x80", "\xff",
                                            "<|endoftext|>", "the", " of"};
    int invalid = 0;
    for (int trial = 0; trial < 3000; trial++) {
        const size_t len = rng.below(trial < 2000 ? 40 : 600);
        std::string x;
        const bool uniform = trial % 3 == 0;
        while (x.size() < len) x += uniform ? std::string(1, char(rng.below(256))) : atoms[rng.below(atoms.size())];
        char32_t cp;
        for (size_t pos = 0, l; pos < x.size(); pos += l ? l : 1)
            if ((l = utf8_next(x, pos, cp)) == 0) {
                invalid++;
                break;
            }
        INFO(fmt::format("{:?}", x));
        const std::vector<int> ids = tok.encode(x);
        for (int id : ids) REQUIRE((id >= 0 && id < tok.size()));
        REQUIRE(decode(tok, ids) == x);
        REQUIRE(decode(tok, tok.encode_with_special(x)) == x);
    }
    CHECK(invalid > 1000);  // the strings did exercise invalid UTF-8
}

TEST_CASE("gpt2: decode rejects ids outside [0, 50257)", "[bpe]") {
    if (gpt2_dir().empty()) return;
    const Gpt2Tokenizer& tok = gpt2();
    REQUIRE_THROWS_WITH(decode(tok, {15496, 50257}),
                        Equals("token id 50257 at position 1 is outside the vocabulary [0, 50257)"));
    REQUIRE_THROWS_WITH(decode(tok, {-1}), Equals("token id -1 at position 0 is outside the vocabulary [0, 50257)"));
    CHECK(decode(tok, {}).empty());
    REQUIRE_THROWS_WITH(tok.token(50257), Equals("token id 50257 is outside the vocabulary [0, 50257)"));
}

TEST_CASE("tokenizers by name: char and gpt2 behind one interface", "[bpe]") {
    REQUIRE_THROWS_WITH(check_tokenizer_name("bpe"), Equals("unknown tokenizer 'bpe' (char | gpt2)"));
    const std::unique_ptr<TextTokenizer> chr = make_tokenizer("char", {"a", "b", "c"}, "");
    CHECK(chr->name() == "char");
    CHECK(chr->size() == 3);
    CHECK(chr->encode("cab") == std::vector<int>{2, 0, 1});
    REQUIRE_THROWS_WITH(make_tokenizer("gpt2", {}, "/nonexistent"), Catch::Contains("/nonexistent/encoder.json"));
    if (gpt2_dir().empty()) return;
    const std::unique_ptr<TextTokenizer> bpe = make_tokenizer("gpt2", {}, gpt2_dir());
    CHECK(bpe->name() == "gpt2");
    CHECK(bpe->size() == 50257);
    const std::vector<int> ids = bpe->encode("Hello world");
    CHECK(ids == std::vector<int>{15496, 995});
    CHECK(bpe->decode(ids.data(), ids.size()) == "Hello world");
}

// test_prepare.cpp — the streaming preparer (lib/data/prepare.h): its token files hold exactly
// the tokens build/train --data=FILE makes of the same text (char and GPT-2, cut into many
// pieces), whatever the thread count; shards and their tails; the val split taken first; and
// bad input refused with nothing left behind.
#include "tests/catch.h"

#include <filesystem>
#include <string>
#include <vector>

#include "lib/core/errors.h"
#include "lib/data/dataset.h"
#include "lib/data/prepare.h"
#include "lib/text/char_tokenizer.h"
#include "lib/text/text_file.h"
#include "lib/text/utf8.h"
#include "tests/app_runner.h"
#include "tests/bpe_files.h"

using namespace hg;
using namespace hg::test;
namespace fs = std::filesystem;

namespace {

std::vector<int> all_tokens(const TokenFiles& f) {
    std::vector<int> ids(f.tokens());
    f.view.copy(0, ids.size(), ids.data());
    return ids;
}

// Every byte of every file in dir, by name.
std::vector<std::pair<std::string, std::string>> dir_bytes(const fs::path& dir) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& e : fs::directory_iterator(dir))
        out.push_back({e.path().filename().string(), read_bytes(e.path())});
    std::sort(out.begin(), out.end());
    return out;
}

PrepareOptions options(const std::string& input, const fs::path& out, const std::string& tokenizer) {
    PrepareOptions o;
    o.inputs = {input};
    o.out_dir = out.string();
    o.tokenizer = tokenizer;
    o.gpt2_dir = tokenizer == "gpt2" ? gpt2_dir() : "";
    return o;
}

}  // namespace

TEST_CASE("prepare: char shards hold train --data's split of tiny Shakespeare, the vocabulary beside them",
          "[data][prepare]") {
    const std::string path = shakespeare_path();
    if (path.empty()) return;
    TempDir tmp;
    PrepareOptions o = options(path, tmp.path / "out", "char");
    o.chunk_bytes = 5000;  // many pieces
    const PrepareResult r = prepare_data(o);
    const std::string text = read_text_file(path);
    const Tokenizer tok = Tokenizer::from_text(text);
    const Split want = split_text(text, tok);
    const TokenData d = open_token_data(o.out_dir);
    CHECK(d.tokenizer.name == "char");
    CHECK(d.tokenizer.vocab == tok.vocab);
    CHECK(all_tokens(d.train) == want.train);
    CHECK(all_tokens(d.val) == want.val);
    CHECK(r.train_tokens == 1003854);  // nanoGPT's shakespeare_char counts
    CHECK(r.val_tokens == 111540);
    CHECK(r.characters == text.size());
}

TEST_CASE("prepare: GPT-2 encoded piece by piece gives the tokens of the whole text, whatever the threads",
          "[data][prepare][gpt2]") {
    const std::string path = shakespeare_path();
    if (path.empty() || gpt2_dir().empty()) return;
    TempDir tmp;
    const std::string text = read_text_file(path);
    const Split want = split_text(text, gpt2());
    std::vector<std::vector<std::pair<std::string, std::string>>> outputs;
    for (int threads : {1, 2}) {
        PrepareOptions o = options(path, tmp.path / std::to_string(threads), "gpt2");
        o.chunk_bytes = 3000;  // about 370 pieces, each cut where GPT-2's pre-tokenizer would cut anyway
        o.threads = threads;
        o.shard_tokens = 100000;
        const PrepareResult r = prepare_data(o);
        const TokenData d = open_token_data(o.out_dir);
        CHECK(all_tokens(d.train) == want.train);
        CHECK(all_tokens(d.val) == want.val);
        CHECK(r.train_tokens == 301966);  // nanoGPT's shakespeare counts
        CHECK(r.val_tokens == 36059);
        CHECK(d.train.paths.size() == 3);  // 100,000 + 100,000 + 101,966 (a tail under 65,536 joins the shard before)
        outputs.push_back(dir_bytes(o.out_dir));
    }
    CHECK(outputs[0] == outputs[1]);
}

TEST_CASE("prepare: shards of shard_tokens, a short tail joined to the shard before; byte-identical for any thread "
          "count; nanoGPT's format holds the same tokens", "[data][prepare]") {
    TempDir tmp;
    const std::string input = write_file(tmp.path / "in.txt", corpus(300));  // 22,500 characters
    std::vector<std::vector<std::pair<std::string, std::string>>> outputs;
    for (int threads : {1, 2, 3, 64}) {  // 64: more threads than a batch has pieces (and than cores)
        PrepareOptions o = options(input, tmp.path / ("t" + std::to_string(threads)), "char");
        o.threads = threads;
        o.chunk_bytes = 700;
        o.shard_tokens = 1000;
        const PrepareResult r = prepare_data(o);
        REQUIRE(r.train_tokens == 20250);
        const TokenData d = open_token_data(o.out_dir);
        REQUIRE(d.train.files.size() == 20);  // 19 of 1,000 and the last with the 250-token tail
        for (size_t i = 0; i + 1 < d.train.files.size(); i++) CHECK(d.train.files[i].n == 1000);
        CHECK(d.train.files.back().n == 1250);
        CHECK(d.val.files.size() == 2);  // 2,250: 1,000 and 1,250
        outputs.push_back(dir_bytes(o.out_dir));
    }
    CHECK(outputs[0] == outputs[1]);
    CHECK(outputs[0] == outputs[2]);
    CHECK(outputs[0] == outputs[3]);

    PrepareOptions o = options(input, tmp.path / "nano", "char");
    o.format = "nanogpt";
    prepare_data(o);
    const TokenData nano = open_token_data(o.out_dir), shards = open_token_data((tmp.path / "t1").string());
    CHECK(nano.format == "nanoGPT");
    CHECK(all_tokens(nano.train) == all_tokens(shards.train));
    CHECK(all_tokens(nano.val) == all_tokens(shards.val));
    CHECK(nano.tokenizer == shards.tokenizer);
}

TEST_CASE("prepare: on multi-byte UTF-8 the split falls on the character train --data=FILE splits at, for "
          "train_fraction and val_chars, with either tokenizer", "[data][prepare]") {
    // Two- to four-byte characters before a longer ASCII text (the split falls there, after
    // them), and after ASCII text (it falls among them): 90 % of the bytes lies far from 90 % of
    // the characters, and a cut by bytes shows in the tokens of both splits. Each multi-byte
    // line has one place where GPT-2's pieces may end (". so"), so small pieces change no token.
    const std::string wide = corpus(60, "καλημέρα κόσμε, ἀγαθὴ ἡμέρα; 你好，世界. so 🙂🌍 ok\n");
    for (const std::string& text : {wide + corpus(500), corpus(40) + wide}) {
        REQUIRE(utf8_count_chars(text) < text.size() * 19 / 20);
        TempDir tmp;
        const std::string input = write_file(tmp.path / "in.txt", text);
        for (const std::string tokenizer : {"char", "gpt2"}) {
            if (tokenizer == "gpt2" && gpt2_dir().empty()) continue;
            const Tokenizer chars = Tokenizer::from_text(text);
            const TextTokenizer& tok = tokenizer == "char" ? static_cast<const TextTokenizer&>(chars) : gpt2();
            const Split want = split_text(text, tok);
            // The split inside a piece, or at its end.
            for (size_t chunk : {size_t(64), size_t(700), size_t(1) << 20}) {
                INFO(tokenizer << ", chunk_bytes " << chunk << ", " << text.size() << " bytes");
                PrepareOptions o = options(input, tmp.path / (tokenizer + std::to_string(chunk)), tokenizer);
                o.chunk_bytes = chunk;
                prepare_data(o);
                const TokenData d = open_token_data(o.out_dir);
                CHECK(all_tokens(d.train) == want.train);
                CHECK(all_tokens(d.val) == want.val);
            }
            // val_chars counts characters too: the first 3,210, wherever their bytes end.
            PrepareOptions o = options(input, tmp.path / (tokenizer + "-val"), tokenizer);
            o.val_chars = 3210;
            size_t cut = 0;
            for (int64_t c = 0; c < o.val_chars; c++) cut += utf8_char_bytes(text, cut);
            prepare_data(o);
            const TokenData d = open_token_data(o.out_dir);
            CHECK(all_tokens(d.val) == tok.encode(text.substr(0, cut)));
            CHECK(all_tokens(d.train) == tok.encode(text.substr(cut)));
        }
    }
}

TEST_CASE("prepare: with val_chars the first characters are val, no first pass; a vocabulary file instead of one; "
          "directories read in path order", "[data][prepare]") {
    TempDir tmp;
    fs::create_directories(tmp.path / "in" / "sub");
    const std::string a = corpus(20), b = corpus(30, "a second file, which comes after the first.\n");
    write_file(tmp.path / "in" / "a.txt", a);
    write_file(tmp.path / "in" / "sub" / "b.txt", b);
    PrepareOptions o = options((tmp.path / "in").string(), tmp.path / "out", "char");
    o.val_chars = 100;
    prepare_data(o);
    const TokenData d = open_token_data(o.out_dir);
    const Tokenizer tok = Tokenizer::from_vocab(d.tokenizer.vocab);
    CHECK(all_tokens(d.val) == tok.encode((a + b).substr(0, 100)));
    CHECK(all_tokens(d.train) == tok.encode((a + b).substr(100)));

    PrepareOptions v = options((tmp.path / "in" / "a.txt").string(), tmp.path / "out2", "char");
    v.vocab = (tmp.path / "out" / "tokenizer.json").string();
    v.val_chars = 10;
    const PrepareResult r = prepare_data(v);
    CHECK(r.first_pass_seconds == 0);
    CHECK(open_token_data(v.out_dir).tokenizer == d.tokenizer);  // the given vocabulary, not a's own
}

TEST_CASE("prepare: bad input is refused in one line and leaves no file behind", "[data][prepare][errors]") {
    TempDir tmp;
    const std::string good = write_file(tmp.path / "good.txt", corpus(20));
    const std::string bad_utf8 = write_file(tmp.path / "bad.txt", corpus(20) + "\xff" + corpus(5));
    const std::string other = write_file(tmp.path / "other.txt", corpus(20, "ZZZ qqq\n"));
    auto refuse = [&](PrepareOptions o, const std::string& phrase) {
        INFO(phrase);
        CHECK_THROWS_WITH(prepare_data(o), Catch::Contains(phrase));
        if (fs::exists(o.out_dir) && o.out_dir != (tmp.path / "taken").string()) CHECK(fs::is_empty(o.out_dir));
    };
    refuse(options(bad_utf8, tmp.path / "o1", "char"), "not UTF-8 at byte 1500");
    PrepareOptions v = options(other, tmp.path / "o2", "char");
    prepare_data(options(good, tmp.path / "vocab", "char"));
    v.vocab = (tmp.path / "vocab" / "tokenizer.json").string();
    refuse(v, "'Z'");  // outside the given vocabulary
    refuse(options((tmp.path / "missing.txt").string(), tmp.path / "o3", "char"), "no such file");
    fs::create_directories(tmp.path / "emptydir");
    refuse(options((tmp.path / "emptydir").string(), tmp.path / "o4", "char"), "no file to read");
    refuse(options(write_file(tmp.path / "empty.txt", ""), tmp.path / "o5", "char"), "");
    PrepareOptions s = options("-", tmp.path / "o6", "char");
    refuse(s, "standard input cannot be read twice");
    PrepareOptions few = options(good, tmp.path / "o7", "char");
    few.train_fraction = 1;
    refuse(few, "--train_fraction must be in (0, 1)");
    PrepareOptions all_val = options(good, tmp.path / "o8", "char");
    all_val.val_chars = 1 << 30;
    refuse(all_val, "the train split is empty");
    prepare_data(options(good, tmp.path / "taken", "char"));
    refuse(options(good, tmp.path / "taken", "char"), "already holds");
}

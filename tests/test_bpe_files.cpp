// test_bpe_files.cpp — GPT-2's tokenizer on files written to order: every flaw in encoder.json or
// vocab.bpe is one clear hg::Error, and the merges follow GPT-2's order exactly, checked against
// GPT-2's own algorithm (rescan, join every occurrence of the best pair) on random vocabularies.
#include "tests/catch.h"

#include <algorithm>
#include <climits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "lib/core/errors.h"
#include "lib/core/rng.h"
#include "lib/text/bpe.h"
#include "tests/bpe_files.h"

using namespace hg;
using namespace hg::test;
using Catch::Matchers::Contains;
using Merges = std::vector<std::pair<std::string, std::string>>;

namespace {

// GPT-2's merge loop as its encoder.py has it, on byte strings: find the adjacent pair of lowest
// rank, join every occurrence left to right, rescan, until no pair has a rank.
std::vector<std::string> plain_bpe(const std::string& word, const Merges& merges) {
    std::map<std::pair<std::string, std::string>, int> rank;
    for (size_t r = 0; r < merges.size(); r++) rank.emplace(merges[r], int(r));
    std::vector<std::string> parts;
    for (char c : word) parts.push_back(std::string(1, c));
    while (parts.size() > 1) {
        int best = INT_MAX;
        std::pair<std::string, std::string> pair;
        for (size_t i = 0; i + 1 < parts.size(); i++) {
            const auto it = rank.find({parts[i], parts[i + 1]});
            if (it != rank.end() && it->second < best) best = it->second, pair = it->first;
        }
        if (best == INT_MAX) break;
        std::vector<std::string> joined;
        for (size_t i = 0; i < parts.size();) {
            if (i + 1 < parts.size() && parts[i] == pair.first && parts[i + 1] == pair.second) {
                joined.push_back(pair.first + pair.second);
                i += 2;
            } else {
                joined.push_back(parts[i++]);
            }
        }
        parts = joined;
    }
    return parts;
}

std::vector<std::string> tokens_of(const Gpt2Tokenizer& tok, const std::string& text) {
    std::vector<std::string> out;
    for (int id : tok.encode(text)) out.push_back(tok.token(id));
    return out;
}

// The message of the hg::Error that loading `dir` throws ("" if it loads), checked to be one line.
std::string load_error(const std::filesystem::path& dir) {
    try {
        Gpt2Tokenizer::load(dir.string());
    } catch (const Error& e) {
        const std::string what = e.what();
        INFO(what);
        CHECK(what.find('\n') == std::string::npos);
        return what;
    }
    return "";
}

}  // namespace

TEST_CASE("bpe: a pass joins every occurrence of its pair before a new lower-ranked pair", "[bpe]") {
    TempDir tmp("handgrad-bpe");
    // "ab a" ranks above "a b". GPT-2 on "abab": the pass of "a b" makes ab ab, and no merge joins
    // those. Merging greedily by rank instead would join "ab a" as soon as the first ab exists:
    // aba b. (This is the case the heap's deferred queueing exists for.)
    write_bpe_files(tmp.path, {{"ab", "a"}, {"a", "b"}});
    const Gpt2Tokenizer tok = Gpt2Tokenizer::load(tmp.path.string());
    CHECK(tokens_of(tok, "abab") == std::vector<std::string>{"ab", "ab"});
    CHECK(tokens_of(tok, "aba") == std::vector<std::string>{"aba"});
    CHECK(plain_bpe("abab", {{"ab", "a"}, {"a", "b"}}) == std::vector<std::string>{"ab", "ab"});
    // "a a a": a join consumes its right symbol, so aa a.
    write_bpe_files(tmp.path, {{"a", "a"}});
    CHECK(tokens_of(Gpt2Tokenizer::load(tmp.path.string()), "aaa") == std::vector<std::string>{"aa", "a"});
}

TEST_CASE("bpe: merges equal GPT-2's rescanning algorithm on random vocabularies", "[bpe]") {
    TempDir tmp("handgrad-bpe");
    Rng rng(50256);
    for (int vocab = 0; vocab < 12; vocab++) {
        // Merges of random pairs of tokens made so far, then listed in a random order, so that
        // ranks ignore the order the tokens were made in (the hardest case for the heap).
        std::vector<std::string> made = {"a", "b", "c"};
        std::set<std::pair<std::string, std::string>> used;
        Merges merges;
        while (merges.size() < 40) {
            const std::string l = made[rng.below(made.size())], r = made[rng.below(made.size())];
            if (l.size() + r.size() > 8 || !used.insert({l, r}).second) continue;
            merges.push_back({l, r});
            if (std::find(made.begin(), made.end(), l + r) == made.end()) made.push_back(l + r);
        }
        for (size_t i = merges.size() - 1; i > 0; i--) std::swap(merges[i], merges[rng.below(i + 1)]);
        write_bpe_files(tmp.path, merges);
        const Gpt2Tokenizer tok = Gpt2Tokenizer::load(tmp.path.string());
        for (int w = 0; w < 300; w++) {
            std::string word;
            const size_t len = 1 + rng.below(w < 250 ? 24 : 300);
            for (size_t i = 0; i < len; i++) word += char('a' + rng.below(3));
            INFO("vocabulary " << vocab << ", word " << word);
            REQUIRE(tokens_of(tok, word) == plain_bpe(word, merges));
        }
    }
}

TEST_CASE("bpe: bad encoder.json or vocab.bpe is one clear error", "[bpe][errors]") {
    TempDir tmp("handgrad-bpe");
    const auto ej = tmp.path / "encoder.json", vb = tmp.path / "vocab.bpe";
    const auto fresh = [&] { write_bpe_files(tmp.path, {{"a", "b"}, {"ab", "c"}, {"c", "c"}}); };
    fresh();
    const std::string good_json = read_bytes(ej), good_bpe = read_bytes(vb);
    REQUIRE(load_error(tmp.path).empty());
    // ids: bytes 0-255, ab 256, abc 257, cc 258, <|endoftext|> 259. a b c c -> ab c c -> abc c
    // ("ab c" ranks above "c c"), and " cc" is the space and cc.
    CHECK(Gpt2Tokenizer::load(tmp.path.string()).encode("abcc cc") == std::vector<int>{257, 'c', ' ', 258});

    CHECK_THAT(load_error(tmp.path / "none"), Contains("cannot read data file") && Contains("none/encoder.json"));
    std::filesystem::remove(vb);
    CHECK_THAT(load_error(tmp.path), Contains("cannot read data file") && Contains("vocab.bpe"));
    fresh();

    SECTION("encoder.json") {
        const auto with_json = [&](const std::string& text) {
            write_file(ej, text);
            return load_error(tmp.path);
        };
        CHECK_THAT(with_json(good_json.substr(0, good_json.size() / 2)), Contains("encoder.json is not valid JSON"));
        CHECK_THAT(with_json(good_json + "}"), Contains("is not valid JSON"));
        CHECK_THAT(with_json(""), Contains("is empty"));
        CHECK_THAT(with_json("[1, 2]"), Contains("is not a JSON object of token -> id"));
        CHECK_THAT(with_json("{}"), Contains("is not a JSON object of token -> id"));
        nlohmann::json j = nlohmann::json::parse(good_json);
        const auto edited = [&](const std::string& key, const nlohmann::json& value) {
            nlohmann::json k = j;
            k[key] = value;
            return with_json(k.dump());
        };
        CHECK_THAT(edited("ab", "x"), Contains("the id of token \"ab\" is \"x\", not a non-negative integer"));
        CHECK_THAT(edited("ab", -1), Contains("not a non-negative integer"));
        CHECK_THAT(edited("ab", 1.5), Contains("not a non-negative integer"));
        CHECK_THAT(edited("ab", 260), Contains("token \"ab\" has id 260, outside [0, 260)"));
        CHECK_THAT(edited("ab", 5), Contains("id 5 is given to two tokens"));
        CHECK_THAT(edited("zz", nlohmann::json(nullptr)), Contains("not a non-negative integer"));
        nlohmann::json k = j;
        k.erase(spell("\n"));
        k["a b"] = 10;  // the raw space is not in GPT-2's alphabet (space is spelled U+0120)
        CHECK_THAT(with_json(k.dump()), Contains("token \"a b\" (id 10) is not spelled in GPT-2's byte alphabet"));
        k.erase("a b");
        k["abcc"] = 10;  // now byte 0x0A has no token
        CHECK_THAT(with_json(k.dump()), Contains("byte 0x0A (\"Ċ\") has no token"));
        k = j;
        k.erase("<|endoftext|>");
        CHECK_THAT(with_json(k.dump()), Contains("has no \"<|endoftext|>\" token"));
        k = j;
        k["xyz"] = 260;  // a token nothing makes
        CHECK_THAT(with_json(k.dump()), Contains("token \"xyz\" (id 260) is neither a byte nor made by any merge"));
    }
    SECTION("vocab.bpe") {
        const auto with_bpe = [&](const std::string& text) {
            write_file(vb, text);
            return load_error(tmp.path);
        };
        CHECK(with_bpe("a b\nab c\nc c\n").empty());  // the #version line is optional
        CHECK_THAT(with_bpe("#version: 0.2\nab\n"), Contains("vocab.bpe line 2: \"ab\" is not a merge \"left right\""));
        CHECK_THAT(with_bpe("#version: 0.2\na b c\n"), Contains("line 2: \"a b c\" is not a merge"));
        CHECK_THAT(with_bpe("#version: 0.2\na b\n\nab c\n"), Contains("line 3: \"\" is not a merge"));
        CHECK_THAT(with_bpe("#version: 0.2\na b\r\nab c\n"), Contains("line 2: \"a b\\r\" is not spelled in GPT-2's"));
        CHECK_THAT(with_bpe("#version: 0.2\na b\nab c\nc c\nb d\n"),
                   Contains("line 5: the merge \"b d\" makes \"bd\", which") && Contains("encoder.json does not have"));
        CHECK_THAT(with_bpe("#version: 0.2\nx yz\n"), Contains("line 2: the merge \"x yz\" needs \"yz\""));
        CHECK_THAT(with_bpe("#version: 0.2\na b\nab c\na b\n"), Contains("line 4: the merge \"a b\" is listed twice"));
        // Cut short at a line's end: the tokens the lost merges made are unexplained.
        CHECK_THAT(with_bpe("#version: 0.2\na b\nab c\n"),
                   Contains("token \"cc\" (id 258) is neither a byte nor made by any merge of") &&
                       Contains("(is it cut short?)"));
        // Cut short inside a line.
        CHECK_THAT(with_bpe(good_bpe.substr(0, good_bpe.size() - 2)), Contains("line 4: \"c \" is not a merge"));
    }
}

TEST_CASE("bpe: GPT-2's own files cut short are refused", "[bpe][errors]") {
    if (gpt2_dir().empty()) return;
    TempDir tmp("handgrad-bpe");
    const std::string json = read_bytes(std::filesystem::path(gpt2_dir()) / "encoder.json");
    const std::string bpe = read_bytes(std::filesystem::path(gpt2_dir()) / "vocab.bpe");
    write_file(tmp.path / "encoder.json", json.substr(0, 500000));
    write_file(tmp.path / "vocab.bpe", bpe);
    CHECK_THAT(load_error(tmp.path), Contains("encoder.json is not valid JSON: [json.exception.parse_error"));
    write_file(tmp.path / "encoder.json", json);
    write_file(tmp.path / "vocab.bpe", bpe.substr(0, bpe.find('\n', 200000) + 1));  // whole lines
    CHECK_THAT(load_error(tmp.path), Contains("is neither a byte nor made by any merge of"));
}

// bpe_files.cpp — reading and validating GPT-2's encoder.json and vocab.bpe (see bpe.h).
#include <nlohmann/json.hpp>

#include <array>
#include <filesystem>

#include "lib/core/errors.h"
#include "lib/text/bpe.h"
#include "lib/text/text_file.h"
#include "lib/text/utf8.h"

namespace hg {

namespace {

// GPT-2's byte alphabet, as the character (code point) that spells each byte in the files.
// The printable bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF spell themselves; the 68 others
// (0x00..0x20, 0x7F..0xA0, 0xAD), in increasing order, are U+0100, U+0101, ..., U+0143.
// The inverse maps a code point below U+0144 back to its byte, or -1.
struct ByteAlphabet {
    std::array<char32_t, 256> spelling;
    std::array<int, 0x144> byte;
    ByteAlphabet() {
        byte.fill(-1);
        char32_t extra = 0x100;
        for (int b = 0; b < 256; b++) {
            const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
            spelling[b] = printable ? char32_t(b) : extra++;
            byte[spelling[b]] = b;
        }
    }
};

const ByteAlphabet& alphabet() {
    static const ByteAlphabet a;
    return a;
}

// The bytes a token of the files spells, or false if it is empty or not spelled in the alphabet.
bool to_bytes(std::string_view spelled, std::string& bytes) {
    bytes.clear();
    char32_t cp;
    for (size_t pos = 0, len; pos < spelled.size(); pos += len) {
        len = utf8_next(spelled, pos, cp);
        if (len == 0 || cp >= alphabet().byte.size() || alphabet().byte[cp] < 0) return false;
        bytes += char(alphabet().byte[cp]);
    }
    return !bytes.empty();
}

// How the files spell `bytes`.
std::string spelling(std::string_view bytes) {
    std::string s;
    for (char c : bytes) s += utf8_encode(alphabet().spelling[static_cast<unsigned char>(c)]);
    return s;
}

// A token as an error message shows it: quoted and escaped, and cut short if long.
std::string shown(std::string_view s) {
    return s.size() <= 40 ? fmt::format("{:?}", s) : fmt::format("{:?}...", s.substr(0, 40));
}

}  // namespace

Gpt2Tokenizer Gpt2Tokenizer::load(const std::string& dir) {
    const std::filesystem::path d(dir);
    return load((d / "encoder.json").string(), (d / "vocab.bpe").string());
}

Gpt2Tokenizer Gpt2Tokenizer::load(const std::string& encoder_json_path, const std::string& vocab_bpe_path) {
    const std::string& ej = encoder_json_path;
    const std::string& vb = vocab_bpe_path;
    Gpt2Tokenizer tok;

    // encoder.json: {"token": id, ...} with the ids exactly 0 .. V-1.
    nlohmann::json json;
    try {
        json = nlohmann::json::parse(read_text_file(ej));
    } catch (const nlohmann::json::exception& e) {
        fail("{} is not valid JSON: {}", ej, e.what());
    }
    check(json.is_object() && !json.empty(), "{} is not a JSON object of token -> id", ej);
    const size_t V = json.size();
    check(V <= size_t(1) << 30, "{} has {} tokens, more than ids can number", ej, V);
    tok.tokens_.resize(V);
    std::vector<bool> given(V, false);
    std::unordered_map<std::string, int> id_of;  // bytes -> id
    id_of.reserve(V);
    std::string bytes;
    for (const auto& [spelled, value] : json.items()) {
        // (if/fail rather than check: the messages' arguments cost, and most tokens are fine)
        if (!value.is_number_unsigned())
            fail("{}: the id of token {} is {}, not a non-negative integer", ej, shown(spelled),
                 value.dump().substr(0, 40));
        const uint64_t id = value.get<uint64_t>();
        if (id >= V) fail("{}: token {} has id {}, outside [0, {}) for {} tokens", ej, shown(spelled), id, V, V);
        if (given[id]) fail("{}: id {} is given to two tokens, one of them {}", ej, id, shown(spelled));
        if (!to_bytes(spelled, bytes))
            fail("{}: token {} (id {}) is not spelled in GPT-2's byte alphabet", ej, shown(spelled), id);
        given[id] = true;
        tok.tokens_[id] = bytes;
        id_of.emplace(bytes, int(id));
    }
    // V distinct ids, each below V: every id in 0 .. V-1 is given exactly once.
    for (int b = 0; b < 256; b++) {
        const auto it = id_of.find(std::string(1, char(b)));
        if (it == id_of.end())
            fail("{}: byte 0x{:02X} ({}) has no token; byte-level BPE needs all 256", ej, b,
                 shown(utf8_encode(alphabet().spelling[b])));
        tok.byte_id_[b] = it->second;
    }
    const auto eot = id_of.find("<|endoftext|>");
    check(eot != id_of.end(), "{} has no \"<|endoftext|>\" token", ej);
    tok.end_of_text_ = eot->second;

    // vocab.bpe: an optional "#version" line, then one merge "left right" a line, in rank order.
    const std::string text = read_text_file(vb);
    std::vector<bool> made(V, false);  // the token is a byte, <|endoftext|>, or made by a merge
    for (int b = 0; b < 256; b++) made[tok.byte_id_[b]] = true;
    made[tok.end_of_text_] = true;
    std::string left, right;
    int rank = 0;
    size_t line_no = 0;
    for (size_t pos = 0; pos < text.size();) {
        size_t eol = text.find('\n', pos);
        if (eol == std::string::npos) eol = text.size();
        const std::string_view line = std::string_view(text).substr(pos, eol - pos);
        pos = eol + 1;
        line_no++;
        if (line_no == 1 && line.rfind("#version", 0) == 0) continue;
        const size_t space = line.find(' ');
        if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
            line.find(' ', space + 1) != std::string_view::npos)
            fail("{} line {}: {} is not a merge \"left right\"", vb, line_no, shown(line));
        if (!to_bytes(line.substr(0, space), left) || !to_bytes(line.substr(space + 1), right))
            fail("{} line {}: {} is not spelled in GPT-2's byte alphabet", vb, line_no, shown(line));
        const auto l = id_of.find(left), r = id_of.find(right), m = id_of.find(left + right);
        const auto missing = [&](std::string_view what, std::string_view token) {
            fail("{} line {}: the merge {} {} {}, which {} does not have", vb, line_no, shown(line), what,
                 shown(token), ej);
        };
        if (l == id_of.end()) missing("needs", line.substr(0, space));
        if (r == id_of.end()) missing("needs", line.substr(space + 1));
        if (m == id_of.end()) missing("makes", std::string(line.substr(0, space)) += line.substr(space + 1));
        if (!tok.merges_.emplace(pair_key(l->second, r->second), Merge{rank, m->second}).second)
            fail("{} line {}: the merge {} is listed twice", vb, line_no, shown(line));
        made[m->second] = true;
        rank++;
    }
    for (size_t id = 0; id < V; id++)
        if (!made[id])
            fail("{}: token {} (id {}) is neither a byte nor made by any merge of {} (is it cut short?)", ej,
                 shown(spelling(tok.tokens_[id])), id, vb);
    tok.pattern_ = compile_pattern();
    return tok;
}

}  // namespace hg

// bpe.cpp — see bpe.h. Loading and validating the two files is in bpe_files.cpp.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cassert>
#include <functional>
#include <tuple>

#include "lib/core/errors.h"
#include "lib/text/bpe.h"
#include "lib/text/utf8.h"

namespace hg {

namespace {

constexpr std::string_view kEndOfText = "<|endoftext|>";

// GPT-2's pattern with \s spelled \p{White_Space} (and \S as \P{White_Space}): see bpe.h.
constexpr const char* kPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\p{White_Space}\p{L}\p{N}]+)"
    R"(|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+)";

std::string pcre2_message(int code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(code, buf, sizeof buf);
    return reinterpret_cast<const char*>(buf);
}

}  // namespace

struct Gpt2Tokenizer::Pattern {
    pcre2_code* code = nullptr;
    Pattern() {
        int error;
        PCRE2_SIZE offset;
        code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                             &error, &offset, nullptr);
        check(code != nullptr, "cannot compile GPT-2's pre-tokenizer pattern: {} (at offset {})",
              pcre2_message(error), offset);
        pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // where PCRE2 has a JIT; without one it still works
    }
    ~Pattern() { pcre2_code_free(code); }
    Pattern(const Pattern&) = delete;
    Pattern& operator=(const Pattern&) = delete;
};

std::shared_ptr<const Gpt2Tokenizer::Pattern> Gpt2Tokenizer::compile_pattern() {
    return std::make_shared<const Pattern>();
}

// A candidate merge inside one piece: the pair of symbols starting at byte `left`, as they were
// when it was queued. Ordered by rank, then position, so the heap yields GPT-2's order.
struct Candidate {
    int rank, left, left_id, right_id, merged_id;
    bool operator>(const Candidate& o) const { return std::tie(rank, left) > std::tie(o.rank, o.left); }
};

struct Gpt2Tokenizer::Workspace {
    pcre2_match_data* match;
    // Every distinct piece is merged once per call: piece -> its ids, pool[first .. first + count).
    std::unordered_map<std::string_view, std::pair<size_t, size_t>> cache;
    std::vector<int> pool;
    // The symbols of the piece being merged, a linked list over byte offsets: the symbol starting
    // at byte i has token id[i] (-1 once merged into its left neighbour) and neighbours prev[i], next[i].
    std::vector<int> id, prev, next;  // (piece bytes)
    std::vector<Candidate> heap;      // a min-heap (std::greater)
    std::vector<int> touched;         // left ends of the pairs one pass of merges created

    explicit Workspace(const pcre2_code* code) : match(pcre2_match_data_create_from_pattern(code, nullptr)) {
        if (!match) throw std::bad_alloc();
    }
    ~Workspace() { pcre2_match_data_free(match); }
    Workspace(const Workspace&) = delete;
    Workspace& operator=(const Workspace&) = delete;
};

// Step 3 of bpe.h, exactly as GPT-2 does it: find the lowest-ranked adjacent pair, join every
// occurrence of it left to right (a join consumes its right symbol, so "a a a" becomes "aa a"),
// repeat. A heap of candidate pairs replaces GPT-2's rescan of the whole piece after each
// pass, which makes long pieces (a megabyte without a space) O(n log n) instead of O(n²):
//   - a pass pops every candidate of the lowest rank r, leftmost first, skipping those whose
//     symbols have changed since they were queued (stale);
//   - the pairs a join creates are queued only after the pass, so that, as in GPT-2, the pass
//     finishes joining the pair of rank r even where a new pair ranks lower. (A new pair never
//     has rank r itself: it contains the joined token, which is longer than either half.)
void Gpt2Tokenizer::bpe(std::string_view piece, Workspace& ws, std::vector<int>& out) const {
    const int n = int(piece.size());
    ws.id.resize(n), ws.prev.resize(n), ws.next.resize(n);
    for (int i = 0; i < n; i++) {
        ws.id[i] = byte_id_[static_cast<unsigned char>(piece[i])];
        ws.prev[i] = i - 1;
        ws.next[i] = i + 1;
    }
    const auto queue = [&](int left) {  // the pair (left, next[left]), if vocab.bpe has it
        const int right = ws.next[left];
        if (right >= n) return;
        const auto m = merges_.find(pair_key(ws.id[left], ws.id[right]));
        if (m == merges_.end()) return;
        ws.heap.push_back({m->second.rank, left, ws.id[left], ws.id[right], m->second.id});
        std::push_heap(ws.heap.begin(), ws.heap.end(), std::greater<>());
    };
    ws.heap.clear();
    for (int i = 0; i + 1 < n; i++) queue(i);
    while (!ws.heap.empty()) {
        const int rank = ws.heap.front().rank;
        ws.touched.clear();
        while (!ws.heap.empty() && ws.heap.front().rank == rank) {
            std::pop_heap(ws.heap.begin(), ws.heap.end(), std::greater<>());
            const Candidate c = ws.heap.back();
            ws.heap.pop_back();
            const int right = ws.next[c.left];
            // A token's length is fixed, so an unchanged id at `left` means an unchanged span.
            if (ws.id[c.left] != c.left_id || right >= n || ws.id[right] != c.right_id) continue;  // stale
            ws.id[c.left] = c.merged_id;
            ws.id[right] = -1;
            ws.next[c.left] = ws.next[right];
            if (ws.next[right] < n) ws.prev[ws.next[right]] = c.left;
            ws.touched.push_back(c.left);
            if (ws.prev[c.left] >= 0) ws.touched.push_back(ws.prev[c.left]);
        }
        for (int left : ws.touched)
            if (ws.id[left] >= 0) queue(left);
    }
    for (int i = 0; i < n; i = ws.next[i]) out.push_back(ws.id[i]);
}

void Gpt2Tokenizer::encode_piece(std::string_view piece, Workspace& ws, std::vector<int>& out) const {
    if (piece.size() == 1) {
        out.push_back(byte_id_[static_cast<unsigned char>(piece[0])]);
        return;
    }
    auto hit = ws.cache.find(piece);
    if (hit == ws.cache.end()) {
        const size_t first = ws.pool.size();
        bpe(piece, ws, ws.pool);
        hit = ws.cache.emplace(piece, std::make_pair(first, ws.pool.size() - first)).first;
    }
    const auto [first, count] = hit->second;
    out.insert(out.end(), ws.pool.begin() + first, ws.pool.begin() + first + count);
}

void Gpt2Tokenizer::encode_into(std::string_view text, Workspace& ws, std::vector<int>& out) const {
    size_t pos = 0;
    while (pos < text.size()) {
        // The longest valid UTF-8 run from pos; it ends at the end or at an invalid byte.
        size_t end = pos, len;
        char32_t cp;
        while (end < text.size() && (len = utf8_next(text, end, cp)) != 0) end += len;
        const std::string_view run = text.substr(pos, end - pos);
        const auto* subject = reinterpret_cast<PCRE2_SPTR>(run.data());
        // Every code point is a letter, a number, white space or none of these, so the pattern's
        // matches tile the run: each starts where the previous one ended and takes at least one.
        for (size_t at = 0; at < run.size();) {
            const int rc = pcre2_match(pattern_->code, subject, run.size(), at, PCRE2_NO_UTF_CHECK, ws.match, nullptr);
            check(rc > 0, "GPT-2's pre-tokenizer failed at byte offset {}: {}", pos + at, pcre2_message(rc));
            const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(ws.match);
            assert(ovector[0] == at && ovector[1] > at);
            encode_piece(run.substr(at, ovector[1] - at), ws, out);
            at = ovector[1];
        }
        if (end < text.size()) out.push_back(byte_id_[static_cast<unsigned char>(text[end++])]);  // invalid
        pos = end;
    }
}

std::vector<int> Gpt2Tokenizer::encode(std::string_view text) const {
    Workspace ws(pattern_->code);
    std::vector<int> out;
    out.reserve(text.size() / 3);  // English runs at about 4 bytes a token
    encode_into(text, ws, out);
    return out;
}

std::vector<int> Gpt2Tokenizer::encode_with_special(std::string_view text) const {
    Workspace ws(pattern_->code);
    std::vector<int> out;
    out.reserve(text.size() / 3);
    for (size_t pos = 0;;) {
        const size_t hit = text.find(kEndOfText, pos);
        encode_into(text.substr(pos, hit == std::string_view::npos ? std::string_view::npos : hit - pos), ws, out);
        if (hit == std::string_view::npos) return out;
        out.push_back(end_of_text_);
        pos = hit + kEndOfText.size();
    }
}

const std::string& Gpt2Tokenizer::token(int id) const {
    check(id >= 0 && id < size(), "token id {} is outside the vocabulary [0, {})", id, size());
    return tokens_[id];
}

std::string Gpt2Tokenizer::decode(const int* ids, size_t n) const {
    std::string out;
    out.reserve(4 * n);
    for (size_t i = 0; i < n; i++) {
        check(ids[i] >= 0 && ids[i] < size(), "token id {} at position {} is outside the vocabulary [0, {})",
              ids[i], i, size());
        out += tokens_[ids[i]];
    }
    return out;
}

}  // namespace hg

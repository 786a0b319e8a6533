// shards.cpp — see shards.h.
#include "lib/data/shards.h"

#include <glob.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lib/core/errors.h"
#include "lib/text/char_tokenizer.h"
#include "lib/text/tokenizer.h"

namespace hg {
namespace fs = std::filesystem;

static int32_t header_int(const uint8_t* p, size_t i) {
    const uint8_t* b = p + 4 * i;  // little-endian, whatever the host
    return int32_t(uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24);
}

TokenFile open_shard(const std::string& path) {
    TokenFile t;
    t.file = ReadFile::open(path);
    const uint64_t size = t.file->size;
    check(size >= kShardHeaderBytes, "{}: {} bytes, shorter than a shard's {}-byte header (truncated?)", path, size,
          kShardHeaderBytes);
    uint8_t p[kShardHeaderBytes];
    t.file->read(0, p, kShardHeaderBytes);
    check(header_int(p, 0) == kShardMagic, "{}: magic (header int 0) is {}, not llm.c's {}", path, header_int(p, 0),
          kShardMagic);
    check(header_int(p, 1) == kShardVersion, "{}: version (header int 1) is {}, not {} (uint16 tokens){}", path,
          header_int(p, 1), kShardVersion,
          header_int(p, 1) == 2 ? "; version 2 holds uint32 tokens, not read here" : "");
    const int32_t n = header_int(p, 2);
    check(n > 0, "{}: token count (header int 2) is {}, must be positive", path, n);
    for (size_t i = 3; i < kShardHeaderInts; i++)
        check(header_int(p, i) == 0, "{}: header int {} is {}, must be 0 (unused in llm.c's version 1)", path, i,
              header_int(p, i));
    const uint64_t want = kShardHeaderBytes + 2 * uint64_t(n);
    check(size == want, "{}: token count (header int 2) is {}, so the file should have {} bytes; it has {}{}", path, n,
          want, size, size < want ? " (truncated?)" : "");
    t.offset = kShardHeaderBytes;
    t.n = size_t(n);
    return t;
}

TokenFile open_raw_tokens(const std::string& path) {
    TokenFile t;
    t.file = ReadFile::open(path);
    check(t.file->size > 0, "{}: empty (nanoGPT's .bin holds uint16 tokens)", path);
    check(t.file->size % 2 == 0, "{}: {} bytes, an odd number: not uint16 tokens (truncated?)", path, t.file->size);
    t.n = size_t(t.file->size / 2);
    return t;
}

std::vector<uint8_t> shard_header(size_t n) {
    check(n > 0 && n <= size_t(INT32_MAX), "a shard holds 1 to {} tokens, not {}", INT32_MAX, n);
    std::vector<uint8_t> h(kShardHeaderBytes, 0);
    const uint32_t fields[3] = {uint32_t(kShardMagic), uint32_t(kShardVersion), uint32_t(n)};
    for (int i = 0; i < 3; i++)
        for (int b = 0; b < 4; b++) h[4 * i + b] = uint8_t(fields[i] >> (8 * b));
    return h;
}

int DataTokenizer::size() const { return name == "char" ? int(vocab.size()) : kGpt2VocabSize; }

std::string DataTokenizer::describe() const {
    return name == "char" ? fmt::format("char ({} tokens)", vocab.size()) : name;
}

DataTokenizer read_data_tokenizer(const std::string& dir) {
    const fs::path path = fs::path(dir) / "tokenizer.json";
    if (fs::exists(path)) return read_tokenizer_file(path.string());
    check(!fs::exists(fs::path(dir) / "meta.pkl"),
          "{} holds nanoGPT's meta.pkl (a char-level vocabulary, a Python pickle) and no tokenizer.json: "
          "write it with tools/nanogpt_meta.py {}", dir, dir);
    return DataTokenizer{};
}

DataTokenizer read_tokenizer_file(const std::string& path) {
    DataTokenizer t;
    std::ifstream f(path);
    check(bool(f), "{}: cannot read", path);
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(f);
        t.name = check_tokenizer_name(j.at("tokenizer").get<std::string>());
        if (t.name == "char") t.vocab = Tokenizer::from_vocab(j.at("vocab").get<std::vector<std::string>>()).vocab;
    } catch (const nlohmann::json::exception& e) {
        fail("{}: not a tokenizer description ({{\"tokenizer\": \"char\", \"vocab\": [...]}} or "
             "{{\"tokenizer\": \"gpt2\"}}): {}", path, e.what());
    } catch (const Error& e) {
        fail("{}: {}", path, e.what());
    }
    return t;
}

void write_data_tokenizer(const std::string& dir, const DataTokenizer& tok) {
    nlohmann::json j{{"tokenizer", tok.name}};
    if (tok.name == "char") j["vocab"] = tok.vocab;
    const fs::path path = fs::path(dir) / "tokenizer.json", tmp = path.string() + ".partial";
    {
        std::ofstream f(tmp, std::ios::binary);
        f << j.dump() << "\n";
        check(bool(f), "cannot write {}", tmp.string());
    }
    fs::rename(tmp, path);
}

std::string TokenData::describe() const {
    return fmt::format("{} ({} train file{}, {} val file{})", format, train.paths.size(),
                       train.paths.size() == 1 ? "" : "s", val.paths.size(), val.paths.size() == 1 ? "" : "s");
}

bool is_token_data_path(const std::string& path) {
    if (path.find_first_of("*?[") != std::string::npos) return true;
    if (fs::is_directory(path)) return true;
    return path.size() > 4 && path.compare(path.size() - 4, 4, ".bin") == 0;
}

// "train", "val", or "" for a file name outside llm.c's naming.
static std::string shard_split(std::string name) {  // ..._train.bin, ..._train_000001.bin
    auto ends_with = [&](const std::string& tail) {
        return name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
    };
    if (!ends_with(".bin")) return "";
    name.resize(name.size() - 4);
    const size_t digits = name.size() - (name.find_last_not_of("0123456789") + 1);
    if (digits > 0 && name.size() > digits && name[name.size() - digits - 1] == '_')
        name.resize(name.size() - digits - 1);
    for (const char* split : {"train", "val"})
        if (ends_with(std::string("_") + split) && name.size() > std::strlen(split) + 1) return split;
    return "";
}

// Opens each path (an llm.c shard, or nanoGPT's raw tokens), checks its tokens against V and its
// length, and returns them with their view.
static TokenFiles open_files(const std::vector<std::string>& paths, bool raw, int V) {
    TokenFiles s;
    std::vector<TokenView::Part> parts;
    std::vector<uint8_t> piece(size_t(2) << 20);  // every id below V, checked 2 MB at a time
    for (const std::string& p : paths) {
        TokenFile t = raw ? open_raw_tokens(p) : open_shard(p);
        for (size_t at = 0; at < t.n; at += piece.size() / 2) {
            const size_t n = std::min(t.n - at, piece.size() / 2);
            t.file->read(t.offset + 2 * uint64_t(at), piece.data(), 2 * n);
            for (size_t i = 0; i < n; i++) {
                const int id = int(piece[2 * i]) | int(piece[2 * i + 1]) << 8;
                check(id < V, "{}: the token at position {} is {}, outside the tokenizer's {} ids", p, at + i, id, V);
            }
        }
        parts.push_back(t.part());
        s.files.push_back(std::move(t));
        s.paths.push_back(p);
    }
    s.view = TokenView::of_parts(std::move(parts));
    return s;
}

TokenData open_token_data(const std::string& path, bool need_train) {
    TokenData d;
    std::vector<std::string> train, val;
    std::vector<std::string> dirs;  // the directories the files are in (their tokenizer.json)
    bool raw = false;
    if (path.find_first_of("*?[") != std::string::npos || !fs::is_directory(path)) {  // a glob, or one file
        glob_t g{};
        const int rc = glob(path.c_str(), 0, nullptr, &g);
        std::vector<std::string> found(g.gl_pathv, g.gl_pathv + (rc == 0 ? g.gl_pathc : 0));
        globfree(&g);
        check(!found.empty(), "--data={}: no file matches", path);
        for (const std::string& f : found) {
            const std::string split = shard_split(fs::path(f).filename().string());
            check(!split.empty(), "{}: not an llm.c shard name (PREFIX_train_NNNNNN.bin or PREFIX_val_NNNNNN.bin)", f);
            (split == "train" ? train : val).push_back(f);
            dirs.push_back(fs::path(f).parent_path().string());
        }
    } else {
        dirs.push_back(path);
        for (const fs::directory_entry& e : fs::directory_iterator(path)) {
            const std::string split = shard_split(e.path().filename().string());
            if (split == "train") train.push_back(e.path().string());
            if (split == "val") val.push_back(e.path().string());
        }
        const bool nano = fs::exists(fs::path(path) / "train.bin") || fs::exists(fs::path(path) / "val.bin");
        check(!(nano && (train.size() + val.size() > 0)),
              "{} holds both llm.c shards and nanoGPT's train.bin / val.bin: which to read is unclear", path);
        check(nano || train.size() + val.size() > 0,
              "{} holds no token files: no llm.c shards (*_train_*.bin, *_val_*.bin), no nanoGPT train.bin / val.bin "
              "(build/prepare writes shards)", path);
        if (nano) {
            raw = true;
            for (const char* name : {"train.bin", "val.bin"}) {
                const fs::path f = fs::path(path) / name;
                check(fs::exists(f) || (!need_train && std::string(name) == "train.bin"), "{}: missing", f.string());
                if (fs::exists(f)) (name[0] == 't' ? train : val).push_back(f.string());
            }
        }
    }
    std::sort(train.begin(), train.end());
    std::sort(val.begin(), val.end());
    check(!train.empty() || !need_train, "{}: no train split (no *_train*.bin)", path);
    check(!val.empty(), "{}: no val split (no *_val*.bin)", path);
    // One tokenizer for every directory the files are in.
    std::sort(dirs.begin(), dirs.end());
    dirs.erase(std::unique(dirs.begin(), dirs.end()), dirs.end());
    d.tokenizer = read_data_tokenizer(dirs.front());
    for (const std::string& dir : dirs) {
        const DataTokenizer t = read_data_tokenizer(dir);
        check(t == d.tokenizer, "--data={} mixes tokenizers: {} in {}, {} in {}", path, d.tokenizer.describe(),
              dirs.front(), t.describe(), dir);
    }
    d.format = raw ? "nanoGPT" : "llm.c shards";
    const int V = d.tokenizer.size();
    d.train = open_files(train, raw, V);
    d.val = open_files(val, raw, V);
    return d;
}

void check_windows(const TokenData& d, int T) {
    for (const TokenFiles* s : {&d.train, &d.val})
        for (size_t i = 0; i < s->files.size(); i++)
            check(s->files[i].n > size_t(T), "{}: {} tokens; block_size {} needs at least {} in every file",
                  s->paths[i], s->files[i].n, T, size_t(T) + 1);
}

void check_same_tokenizer(const TokenData& d, const std::string& name, const std::vector<std::string>& vocab,
                          const std::string& whose) {
    DataTokenizer t;
    t.name = name;
    if (name == "char") t.vocab = vocab;
    check(t == d.tokenizer, "{} reads {} ids, and the data holds {} ids{}", whose, t.describe(),
          d.tokenizer.describe(), t.name == d.tokenizer.name ? " (another vocabulary)" : "");
}

}  // namespace hg

// prepare.cpp — see prepare.h.
#include "lib/data/prepare.h"

#include <omp.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "lib/core/errors.h"
#include "lib/core/parallel.h"
#include "lib/data/token_writer.h"
#include "lib/text/char_tokenizer.h"
#include "lib/text/tokenizer_by_name.h"
#include "lib/text/utf8.h"

namespace hg {
namespace fs = std::filesystem;

std::vector<std::string> list_inputs(const std::vector<std::string>& inputs, const std::string& skip_dir) {
    check(!inputs.empty(), "no input: give files, directories, or - for standard input");
    const fs::path skip = skip_dir.empty() ? fs::path() : fs::weakly_canonical(skip_dir);
    auto skipped = [&](const fs::path& p) {
        if (skip.empty()) return false;
        const fs::path c = fs::weakly_canonical(p);
        return std::mismatch(skip.begin(), skip.end(), c.begin(), c.end()).first == skip.end();
    };
    std::vector<std::string> files;
    for (const std::string& in : inputs) {
        if (in == "-") {
            check(std::count(inputs.begin(), inputs.end(), "-") == 1, "- (standard input) given more than once");
            files.push_back(in);
        } else if (fs::is_directory(in)) {
            std::vector<std::string> under;
            for (const fs::directory_entry& e : fs::recursive_directory_iterator(in))
                if (e.is_regular_file() && !skipped(e.path())) under.push_back(e.path().string());
            check(!under.empty(), "{}: a directory with no file to read", in);
            std::sort(under.begin(), under.end());
            files.insert(files.end(), under.begin(), under.end());
        } else {
            check(fs::is_regular_file(in) || (fs::exists(in) && !fs::is_directory(in)), "{}: no such file or directory",
                  in);
            files.push_back(in);
        }
    }
    return files;
}

namespace {

// The inputs as one stream of bytes.
class ByteStream {
public:
    explicit ByteStream(std::vector<std::string> files) : files_(std::move(files)) {}
    ~ByteStream() { close(); }
    // Up to n bytes into dst; 0 at the end of the last input.
    size_t read(char* dst, size_t n) {
        while (true) {
            if (!f_) {
                if (next_ == files_.size()) return 0;
                const std::string& p = files_[next_++];
                f_ = p == "-" ? stdin : std::fopen(p.c_str(), "rb");
                check(f_ != nullptr, "cannot read {}: {}", p, std::strerror(errno));
            }
            const size_t got = std::fread(dst, 1, n, f_);
            if (got > 0) return got;
            check(!std::ferror(f_), "cannot read {}: {}", files_[next_ - 1], std::strerror(errno));
            close();
        }
    }

private:
    std::vector<std::string> files_;
    size_t next_ = 0;
    FILE* f_ = nullptr;
    void close() {
        if (f_ && f_ != stdin) std::fclose(f_);
        f_ = nullptr;
    }
};

bool is_graphic_ascii(unsigned char c) { return c > 0x20 && c < 0x7f; }
bool is_ascii_letter(unsigned char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Where a piece of s starting at 0 ends. GPT-2: the last cut in [lo, hi] that changes nothing
// (see prepare.h), else a character boundary at or before hi. char: every character boundary
// changes nothing, so the one at or before lo (the smaller piece, the less memory). s holds at
// least hi + 2 bytes.
size_t find_cut(std::string_view s, size_t lo, size_t hi, bool gpt2) {
    auto u = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
    if (gpt2)
        for (size_t p = hi; p >= lo && p >= 2; p--) {
            if (u(p) == ' ' && is_graphic_ascii(u(p - 1)) && is_ascii_letter(u(p + 1))) return p;
            if (is_ascii_letter(u(p)) && u(p - 1) == '\n' && is_graphic_ascii(u(p - 2))) return p;
        }
    const size_t at = gpt2 ? hi : lo;
    size_t p = at;
    while (p > 1 && is_continuation(u(p)) && at - p < 3) p--;
    return p;
}

// The first pass: the characters of the stream, and (char tokenizer) its distinct ones.
struct FirstPass {
    uint64_t chars = 0;
    std::vector<std::string> vocab;
};

FirstPass first_pass(ByteStream& in, bool want_vocab, uint64_t total,
                     const std::function<void(const PrepareProgress&)>& progress) {
    FirstPass r;
    std::vector<bool> seen(want_vocab ? 0x110000 : 0);
    std::string buf;  // carried: the unfinished character at a read's end
    std::vector<char> block(size_t(4) << 20);
    uint64_t offset = 0, bytes = 0;  // of buf[0] in the stream; read so far
    const auto t0 = std::chrono::steady_clock::now();
    while (true) {
        const size_t got = in.read(block.data(), block.size());
        buf.append(block.data(), got);
        bytes += got;
        // Whole characters only, unless the stream has ended: a character begun in the last 3
        // bytes waits for the next read.
        size_t end = buf.size();
        for (size_t p = end; got > 0 && p > 0 && end - p < 3; p--)
            if (!is_continuation(static_cast<unsigned char>(buf[p - 1]))) {
                const unsigned char lead = static_cast<unsigned char>(buf[p - 1]);
                const size_t len = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
                if (len > end - (p - 1)) end = p - 1;
                break;
            }
        const std::string_view s(buf.data(), end);
        if (want_vocab) {
            for (size_t i = 0; i < s.size();) {
                char32_t cp;
                const size_t n = utf8_next(s, i, cp);
                check(n > 0, "the input is not UTF-8 at byte {} (the char tokenizer reads characters)", offset + i);
                seen[cp] = true;
                i += n;
                r.chars++;
            }
        } else {
            r.chars += utf8_count_chars(s);
        }
        offset += end;
        buf.erase(0, end);
        if (progress) {
            PrepareProgress p;
            p.bytes = bytes, p.total_bytes = total, p.first_pass = true;
            p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            progress(p);
        }
        if (got == 0) break;
    }
    for (char32_t cp = 0; cp < 0x110000; cp++)
        if (want_vocab && seen[cp]) r.vocab.push_back(utf8_encode(cp));
    return r;
}

struct Piece {
    std::string text;
    bool val = false;
    uint64_t offset = 0;  // of its first byte in the stream
    std::vector<int> ids;
};

}  // namespace

PrepareResult prepare_data(const PrepareOptions& opt, const std::function<void(const PrepareProgress&)>& progress) {
    PrepareResult r;
    const auto t_start = std::chrono::steady_clock::now();
    auto since = [](std::chrono::steady_clock::time_point t) {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    };
    check_tokenizer_name(opt.tokenizer);
    check(opt.format == "llm.c" || opt.format == "nanogpt", "--format must be llm.c or nanogpt, got '{}'", opt.format);
    check(opt.chunk_bytes >= 64, "--chunk_bytes must be at least 64, got {}", opt.chunk_bytes);
    check(opt.batch_pieces >= 1 && opt.batch_pieces <= 4096, "--batch_pieces must be in [1, 4096], got {}",
          opt.batch_pieces);
    check(opt.val_chars >= 0 || (opt.train_fraction > 0 && opt.train_fraction < 1),
          "--train_fraction must be in (0, 1), got {} (the val split needs some text)", opt.train_fraction);
    check(!opt.out_dir.empty(), "--out_dir is needed");
    check(opt.tokenizer == "char" || opt.vocab.empty(), "--vocab is the char tokenizer's (GPT-2's is fixed)");
    const std::vector<std::string> files = list_inputs(opt.inputs, opt.out_dir);
    const bool from_stdin = std::find(files.begin(), files.end(), "-") != files.end();
    uint64_t total = 0;
    for (const std::string& f : files) total += f == "-" ? 0 : uint64_t(fs::file_size(f));
    if (from_stdin) total = 0;

    // The out_dir: made if missing, refused if it already holds token files.
    fs::create_directories(opt.out_dir);
    for (const fs::directory_entry& e : fs::directory_iterator(opt.out_dir)) {
        const std::string name = e.path().filename().string();
        check(!(e.path().extension() == ".bin" || name == "tokenizer.json"),
              "{} already holds {}: remove the old token files or choose another --out_dir", opt.out_dir, name);
    }

    // The tokenizer, and what a first pass must find.
    r.tokenizer.name = opt.tokenizer;
    if (opt.tokenizer == "char" && !opt.vocab.empty()) {
        r.tokenizer = read_tokenizer_file(opt.vocab);
        check(r.tokenizer.name == "char", "--vocab={}: a {} tokenizer, not char's vocabulary", opt.vocab,
              r.tokenizer.name);
    }
    const bool need_vocab = opt.tokenizer == "char" && opt.vocab.empty();
    const bool need_count = opt.val_chars < 0;
    check(!from_stdin || (!need_vocab && !need_count),
          "standard input cannot be read twice: give --val_chars=N (the first N characters are val){}",
          need_vocab ? " and --vocab=DIR/tokenizer.json (the char tokenizer's vocabulary)" : "");
    uint64_t cut_chars = uint64_t(std::max<int64_t>(0, opt.val_chars));  // where the first split ends
    if (need_vocab || need_count) {
        const auto t0 = std::chrono::steady_clock::now();
        ByteStream in(files);
        FirstPass fp = first_pass(in, need_vocab, total, progress);
        if (need_vocab) r.tokenizer.vocab = Tokenizer::from_vocab(std::move(fp.vocab)).vocab;
        if (need_count) cut_chars = uint64_t(double(fp.chars) * opt.train_fraction);  // int(n * 0.9), as split_text
        r.first_pass_seconds = since(t0);
    }
    check(r.tokenizer.size() <= 65536, "the char tokenizer has {} tokens; the token files hold ids below 65,536",
          r.tokenizer.size());
    const auto tok = make_tokenizer(r.tokenizer.name, r.tokenizer.vocab, opt.gpt2_dir);
    const bool gpt2 = opt.tokenizer == "gpt2";
    const bool val_first = opt.val_chars >= 0;

    TokenWriter train(opt.out_dir, opt.format, opt.prefix, "train", opt.shard_tokens,
                      std::min(kTailTokens, opt.shard_tokens));
    TokenWriter val(opt.out_dir, opt.format, opt.prefix, "val", opt.shard_tokens,
                    std::min(kTailTokens, opt.shard_tokens));

    // The second pass: pieces, a batch at a time, encoded side by side, written in order.
    const auto t0 = std::chrono::steady_clock::now();
    const int K = opt.batch_pieces, threads = opt.threads > 0 ? opt.threads : omp_get_max_threads();
    const size_t C = opt.chunk_bytes;
    ByteStream in(files);
    std::string buf;  // the stream from `offset` on, not yet cut
    std::vector<char> block(C);
    uint64_t offset = 0, chars = 0;
    bool eof = false, first_split = true;  // in the split that comes first (train, or val with val_chars)
    std::vector<Piece> batch(static_cast<size_t>(K));
    while (true) {
        int n = 0;
        for (; n < K; n++) {
            while (!eof && buf.size() < 2 * C + 4) {
                const size_t got = in.read(block.data(), block.size());
                eof = got == 0;
                buf.append(block.data(), got);
            }
            if (buf.empty()) break;
            size_t end = buf.size() <= 2 * C + 2 ? buf.size() : find_cut(buf, C, 2 * C, gpt2);
            // The split: no piece straddles its character.
            if (first_split && cut_chars - chars <= end) {
                size_t p = 0;
                for (uint64_t c = chars; c < cut_chars && p < end; c++) p += utf8_char_bytes(buf, p);
                if (chars + utf8_count_chars(std::string_view(buf.data(), p)) == cut_chars) end = p;
            }
            Piece& pc = batch[size_t(n)];
            pc.text.assign(buf, 0, end);
            pc.val = first_split == val_first;
            pc.offset = offset;
            chars += utf8_count_chars(pc.text);
            if (first_split && chars >= cut_chars) first_split = false;
            offset += end;
            buf.erase(0, end);
            if (end == 0) n--;  // the split fell here: nothing to encode
        }
        if (n == 0) break;
        ParallelExceptions errors;
#pragma omp parallel for schedule(dynamic, 1) num_threads(std::min(threads, n))
        for (int i = 0; i < n; i++) errors.run(i, [&] { batch[size_t(i)].ids = tok->encode(batch[size_t(i)].text); });
        if (errors.any()) {
            const Piece& pc = batch[size_t(errors.piece())];
            try {
                errors.rethrow();
            } catch (const Error& e) {
                fail("in the input's bytes {} to {}: {}", pc.offset, pc.offset + pc.text.size(), e.what());
            }
        }
        for (int i = 0; i < n; i++) {
            Piece& pc = batch[size_t(i)];
            (pc.val ? val : train).write(pc.ids.data(), pc.ids.size());
            std::vector<int>().swap(pc.ids);  // not held while the next batch is read
        }
        if (progress) {
            PrepareProgress p;
            p.bytes = offset, p.total_bytes = total, p.tokens = train.tokens() + val.tokens(), p.seconds = since(t0);
            progress(p);
        }
    }
    check(train.tokens() > 0 && val.tokens() > 0, "the {} split is empty ({} characters in all, {} to the first split)",
          train.tokens() == 0 ? "train" : "val", chars, cut_chars);
    train.finish();
    val.finish();
    if (opt.tokenizer == "char" || opt.format == "llm.c") write_data_tokenizer(opt.out_dir, r.tokenizer);
    train.commit();
    val.commit();
    r.bytes = offset, r.characters = chars, r.train_tokens = train.tokens(), r.val_tokens = val.tokens();
    r.files = train.paths();
    r.files.insert(r.files.end(), val.paths().begin(), val.paths().end());
    r.seconds = since(t_start);
    return r;
}

}  // namespace hg

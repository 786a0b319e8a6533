// token_writer.cpp — see token_writer.h.
#include "lib/data/token_writer.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "lib/core/errors.h"
#include "lib/data/shards.h"

namespace hg {
namespace fs = std::filesystem;

TokenWriter::TokenWriter(std::string dir, std::string format, std::string prefix, std::string split,
                         size_t shard_tokens, size_t tail_tokens)
    : dir_(std::move(dir)), format_(std::move(format)), prefix_(std::move(prefix)), split_(std::move(split)),
      shard_tokens_(shard_tokens), tail_tokens_(tail_tokens) {
    check(format_ == "llm.c" || format_ == "nanogpt", "unknown token file format '{}' (llm.c | nanogpt)", format_);
    check(shard_tokens_ >= 1 && shard_tokens_ + tail_tokens_ <= size_t(INT32_MAX),
          "--shard_tokens must be in [1, {}], got {}", size_t(INT32_MAX) - tail_tokens_, shard_tokens_);
}

TokenWriter::~TokenWriter() {
    if (f_) std::fclose(f_);
    if (committed_) return;
    std::error_code ec;
    for (const std::string& p : paths_) fs::remove(p + ".partial", ec);
}

void TokenWriter::open_next() {
    const std::string name = format_ == "nanogpt" ? split_ + ".bin"
                                                  : fmt::format("{}_{}_{:06d}.bin", prefix_, split_, paths_.size());
    paths_.push_back((fs::path(dir_) / name).string());
    const std::string partial = paths_.back() + ".partial";
    f_ = std::fopen(partial.c_str(), "wb");
    check(f_ != nullptr, "cannot write {}: {}", partial, std::strerror(errno));
    in_file_ = 0;
    if (format_ == "llm.c") {  // a placeholder header: the count is known at the end
        const std::vector<uint8_t> zeros(kShardHeaderBytes, 0);
        check(std::fwrite(zeros.data(), 1, zeros.size(), f_) == zeros.size(), "cannot write {}", partial);
    }
}

void TokenWriter::append(const uint16_t* t, size_t n) {
    if (n == 0) return;
    if (!f_) open_next();
    // little-endian on disk; this host is too (x86-64, as the shards' readers assume)
    check(std::fwrite(t, 2, n, f_) == n, "cannot write {}.partial: {}", paths_.back(), std::strerror(errno));
    in_file_ += n;
    total_ += n;
}

void TokenWriter::close_file() {
    if (!f_) return;
    bool ok = true;
    if (format_ == "llm.c") {
        const std::vector<uint8_t> h = shard_header(in_file_);
        ok = std::fseek(f_, 0, SEEK_SET) == 0 && std::fwrite(h.data(), 1, h.size(), f_) == h.size();
    }
    ok = std::fclose(f_) == 0 && ok;
    f_ = nullptr;
    check(ok, "cannot write {}.partial: {}", paths_.back(), std::strerror(errno));
}

void TokenWriter::write(const int* ids, size_t n) {
    buf_.resize(n);
    for (size_t i = 0; i < n; i++) {
        check(ids[i] >= 0 && ids[i] < 65536, "token id {} does not fit the files' uint16", ids[i]);
        buf_[i] = uint16_t(ids[i]);
    }
    const uint16_t* t = buf_.data();
    if (format_ == "nanogpt") return append(t, n);
    while (n > 0) {
        if (held_.empty() && (!f_ || in_file_ < shard_tokens_)) {
            const size_t take = std::min(n, shard_tokens_ - (f_ ? in_file_ : 0));
            append(t, take);
            t += take, n -= take;
            continue;
        }
        // The open shard is full: hold tokens back until there are enough for a shard of their own.
        const size_t take = std::min(n, tail_tokens_ - held_.size());
        held_.insert(held_.end(), t, t + take);
        t += take, n -= take;
        if (held_.size() == tail_tokens_) {
            close_file();
            open_next();
            std::vector<uint16_t> h;
            h.swap(held_);
            append(h.data(), h.size());
        }
    }
}

void TokenWriter::finish() {
    append(held_.data(), held_.size());  // the short tail joins the full shard before it
    held_.clear();
    close_file();
}

void TokenWriter::commit() {
    for (const std::string& p : paths_) fs::rename(p + ".partial", p);
    committed_ = true;
}

}  // namespace hg

// token_view.cpp — see token_view.h.
#include "lib/data/token_view.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstring>

#include "lib/core/errors.h"

namespace hg {

std::shared_ptr<const ReadFile> ReadFile::open(const std::string& path) {
    auto f = std::make_shared<ReadFile>();
    f->path = path;
    f->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    check(f->fd >= 0, "{}: cannot open: {}", path, std::strerror(errno));
    struct stat st {};
    check(fstat(f->fd, &st) == 0 && S_ISREG(st.st_mode), "{}: not a regular file", path);
    f->size = uint64_t(st.st_size);
#ifdef POSIX_FADV_RANDOM
    posix_fadvise(f->fd, 0, 0, POSIX_FADV_RANDOM);  // windows are read at random places: no read-ahead
#endif
    return f;
}

ReadFile::~ReadFile() {
    if (fd >= 0) ::close(fd);
}

void ReadFile::read(uint64_t offset, void* dst, size_t n) const {
    auto* p = static_cast<char*>(dst);
    size_t done = 0;
    while (done < n) {
        const ssize_t got = pread(fd, p + done, n - done, off_t(offset + done));
        if (got > 0) {
            done += size_t(got);
            continue;
        }
        if (got < 0 && errno == EINTR) continue;
        const int e = errno;
        struct stat st {};
        const bool known = fstat(fd, &st) == 0;
        check(got == 0, "{}: cannot read {} bytes at byte {}: {}", path, n, offset, std::strerror(e));
        fail("{}: the file is {} bytes now, {} when it was opened: it was cut short while in use "
             "(byte {} is gone)", path, known ? std::to_string(st.st_size) : "?", size, offset + done);
    }
}

TokenView TokenView::of_parts(std::vector<Part> parts) {
    TokenView v;
    v.starts_.push_back(0);
    for (const Part& p : parts) v.starts_.push_back(v.starts_.back() + p.n);
    v.size_ = v.starts_.back();
    v.parts_ = std::move(parts);
    return v;
}

void TokenView::copy(size_t start, size_t n, int* out) const {
    assert(start + n <= size_);
    if (ints_) {
        std::copy(ints_ + start, ints_ + start + n, out);
        return;
    }
    // The part holding `start`: the last whose beginning is <= start.
    size_t k = size_t(std::upper_bound(starts_.begin(), starts_.end(), start) - starts_.begin()) - 1;
    size_t done = 0;
    while (done < n) {
        const Part& p = parts_[k];
        const size_t off = start + done - starts_[k];
        const size_t take = std::min(n - done, p.n - off);
        int* dst = out + done;
        if (p.tokens) {
            std::copy(p.tokens + off, p.tokens + off + take, dst);
        } else {
            // The 2·take bytes go to the upper half of dst's 4·take and are widened front to
            // back: int i overwrites bytes [4i, 4i + 4) after token i is read, and every token
            // j > i lies at bytes 2·take + 2j >= 4i + 4, past them.
            auto* bytes = reinterpret_cast<unsigned char*>(dst);
            p.file->read(p.offset + 2 * uint64_t(off), bytes + 2 * take, 2 * take);
            for (size_t i = 0; i < take; i++) {
                const unsigned char* b = bytes + 2 * take + 2 * i;
                dst[i] = int(b[0]) | int(b[1]) << 8;
            }
        }
        done += take;
        k++;
    }
}

int TokenView::at(size_t i) const {
    int id;
    copy(i, 1, &id);
    return id;
}

bool TokenView::same_as(const TokenView& o) const {
    if (ints_ != o.ints_ || size_ != o.size_ || parts_.size() != o.parts_.size()) return false;
    for (size_t i = 0; i < parts_.size(); i++)
        if (parts_[i].tokens != o.parts_[i].tokens || parts_[i].file != o.parts_[i].file ||
            parts_[i].offset != o.parts_[i].offset)
            return false;
    return true;
}

}  // namespace hg

// atomic_file.cpp — see atomic_file.h.
#include "lib/checkpoint/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "lib/core/errors.h"

namespace hg {

namespace {

std::string errno_str(int err) { return std::strerror(err); }

// Writes all n bytes (write(2) may write fewer, or be interrupted); false with errno set on error.
bool write_fully(int fd, const void* buf, size_t n) {
    size_t put = 0;
    while (put < n) {
        ssize_t w = ::write(fd, static_cast<const char*>(buf) + put, n - put);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return false;
        if (w == 0) {  // no progress and no error: do not spin forever
            errno = EIO;
            return false;
        }
        put += size_t(w);
    }
    return true;
}

// A save to `path` writes path.tmp.<pid> first.
std::string temp_prefix(const std::string& path) { return path + ".tmp."; }

// The temp file of one save(): closed on every path out, and deleted unless it was renamed.
struct TempFile {
    std::string path;
    int fd = -1;
    bool renamed = false;
    ~TempFile() {
        if (fd >= 0) ::close(fd);
        if (!renamed && !path.empty()) ::unlink(path.c_str());
    }
};

}  // namespace

int remove_unfinished_saves(const std::string& path) {
    namespace fs = std::filesystem;
    const fs::path dir = fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
    const std::string prefix = fs::path(temp_prefix(path)).filename().string();
    int removed = 0;
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        const bool digits = name.size() > prefix.size() &&
                            name.find_first_not_of("0123456789", prefix.size()) == std::string::npos;
        if (name.compare(0, prefix.size(), prefix) == 0 && digits && fs::remove(e.path(), ec)) removed++;
    }
    return removed;
}

void write_file_atomically(const std::string& path, const std::vector<Bytes>& pieces) {
    TempFile tmp;
    tmp.path = fmt::format("{}{}", temp_prefix(path), ::getpid());
    tmp.fd = ::open(tmp.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (tmp.fd < 0) {
        const std::string why = errno_str(errno), name = tmp.path;
        tmp.path.clear();  // nothing was created, so there is nothing to delete
        fail("cannot save {}: cannot create {}: {}", path, name, why);
    }
    // Raw write(2) on the descriptor: no stdio buffer in between, so nothing to fflush.
    bool ok = true;
    for (size_t i = 0; ok && i < pieces.size(); i++) ok = write_fully(tmp.fd, pieces[i].data, pieces[i].size);
    check(ok, "cannot save {}: writing {} failed: {}", path, tmp.path, errno_str(errno));
    // fsync: the bytes reach the disk before the rename can make them the checkpoint.
    check(::fsync(tmp.fd) == 0, "cannot save {}: fsync of {} failed: {}", path, tmp.path, errno_str(errno));
    int fd = tmp.fd;
    tmp.fd = -1;
    // close can report a deferred write error (e.g. on NFS), so its result is checked too.
    check(::close(fd) == 0, "cannot save {}: closing {} failed: {}", path, tmp.path, errno_str(errno));
    check(::rename(tmp.path.c_str(), path.c_str()) == 0, "cannot save {}: renaming {} over it failed: {}",
          path, tmp.path, errno_str(errno));
    tmp.renamed = true;

    // fsync the directory, so the rename itself (a directory entry) survives a crash.
    std::string dir = std::filesystem::path(path).parent_path().string();
    if (dir.empty()) dir = ".";
    const int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const bool synced = d >= 0 && ::fsync(d) == 0;
    const int err = errno;
    if (d >= 0) ::close(d);
    check(synced,
          "saved {}, but could not fsync its directory {} (the new file may not survive a crash): {}", path,
          dir, errno_str(err));
}

}  // namespace hg

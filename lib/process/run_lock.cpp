// run_lock.cpp — see run_lock.h.
#include "lib/process/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "lib/core/errors.h"

namespace hg {

namespace fs = std::filesystem;

std::string run_lock_owner_line() {
    char host[256] = "?";
    ::gethostname(host, sizeof host - 1);
    const std::time_t now = std::time(nullptr);
    std::tm utc{};
    ::gmtime_r(&now, &utc);
    char when[32];
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &utc);
    return fmt::format("pid {} on host {}, started {} UTC", ::getpid(), host, when);
}

RunLock::RunLock(const std::string& out_dir) {
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    check(!ec, "cannot create --out_dir {}: {}", out_dir, ec.message());
    check(fs::is_directory(out_dir, ec), "--out_dir {} is not a directory", out_dir);
    path_ = (fs::path(out_dir) / "train.lock").string();
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    check(fd_ >= 0, "cannot write in --out_dir {}: creating {} failed: {}", out_dir, path_, std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        const int err = errno;
        std::string owner(512, '\0');
        const ssize_t n = ::pread(fd_, owner.data(), owner.size(), 0);
        owner.resize(n > 0 ? size_t(n) : 0);
        while (!owner.empty() && (owner.back() == '\n' || owner.back() == '\0')) owner.pop_back();
        ::close(fd_);
        fd_ = -1;
        check(err != EWOULDBLOCK, "--out_dir {} is in use by another run ({}); wait for it to end, stop it, or give "
              "another --out_dir", out_dir, owner.empty() ? "its lock file is empty" : owner);
        fail("cannot lock {}: {}", path_, std::strerror(err));
    }
    const std::string line = run_lock_owner_line() + "\n";
    // The owner line is informational: a failure to write it leaves the lock held all the same.
    const bool written = ::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, line.data(), line.size(), 0) == ssize_t(line.size());
    (void)written;
}

RunLock::~RunLock() {
    if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the lock
}

}  // namespace hg

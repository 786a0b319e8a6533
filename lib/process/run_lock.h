// run_lock.h — one training run per out_dir.
//
// A run holds an exclusive flock(2) on out_dir/train.lock for its whole life. The lock file
// says who holds it (pid, host, start time, UTC); a second run on the same out_dir finds the
// lock taken and is refused with that line, before it reads or writes anything there. The
// kernel drops the lock when the holder's file descriptor closes, which includes every way a
// process can die (kill -9 too), so a stale lock file left behind is simply taken over by the
// next run, and --init_from=resume on an out_dir nobody holds works as if it were not there.
// (flock over NFS is emulated with POSIX byte-range locks by Linux, which NFS carries.)
#pragma once
#include <string>

namespace hg {

class RunLock {
public:
    // Creates out_dir (and its parents) when missing, then takes the lock; hg::Error when the
    // directory cannot be created or written, or when another run holds it (naming that run).
    explicit RunLock(const std::string& out_dir);
    ~RunLock();
    RunLock(const RunLock&) = delete;
    RunLock& operator=(const RunLock&) = delete;

    const std::string& path() const { return path_; }

private:
    std::string path_;
    int fd_ = -1;
};

// "pid 1234 on host node7, started 2026-12-01 20:31:07 UTC": what the lock file holds.
std::string run_lock_owner_line();

}  // namespace hg

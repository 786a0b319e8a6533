// atomic_file.h — replacing a file whole or not at all, and cleaning up after a save that died.
//
// write_file_atomically writes everything to a temp file in the same directory (path.tmp.<pid>:
// rename is only atomic within one file system), fsyncs it, renames it over `path`, and fsyncs
// the directory. Until the rename, `path` still holds the old file; after it, the complete new
// one; so a crash, a kill -9 or a full disk mid-save never destroys the last good file.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace hg {

struct Bytes {
    const void* data;
    size_t size;
};

// Writes the pieces, one after another, as the new contents of `path`. Throws hg::Error naming
// the step that failed (create, write, fsync, close, rename) and why; the temp file is removed
// on every failure.
void write_file_atomically(const std::string& path, const std::vector<Bytes>& pieces);

// A save killed before its rename (kill -9, a power cut) leaves its temp file, path.tmp.<pid>,
// beside `path`; nothing ever reads it (a load opens `path` only). Removes those of `path` and
// returns how many; only for a caller that holds the run lock of the directory
// (lib/process/run_lock.h), so that no other process can be saving there now.
int remove_unfinished_saves(const std::string& path);

}  // namespace hg

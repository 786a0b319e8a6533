// text_file.cpp — see text_file.h.
#include "lib/text/text_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "lib/core/errors.h"

namespace hg {

std::string read_text_file(const std::string& path) {
    // C stdio rather than iostreams: it sets errno, so the message can say *why* it failed.
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
    if (!f) fail("cannot read data file '{}': {}", path, std::strerror(errno));
    // A device (/dev/zero, /dev/urandom) would be read forever; a pipe is read to its end.
    struct stat st;
    check(::fstat(::fileno(f.get()), &st) == 0 && !S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode) && !S_ISSOCK(st.st_mode),
          "data file '{}' is not a regular file (a device or a socket)", path);
    std::string text;
    char buf[1 << 16];
    size_t got;
    while ((got = std::fread(buf, 1, sizeof buf, f.get())) > 0) text.append(buf, got);
    // fopen succeeds on a directory on Linux; the read then fails with EISDIR.
    if (std::ferror(f.get())) fail("cannot read data file '{}': {}", path, std::strerror(errno));
    check(!text.empty(), "data file '{}' is empty", path);
    return text;
}

}  // namespace hg

// tensor.cpp — the arenas' request for huge pages (tensor.h).
#include "lib/core/tensor.h"

#include <sys/mman.h>
#include <unistd.h>

namespace hg {

void ask_for_huge_pages(void* p, size_t bytes) {
#ifdef MADV_HUGEPAGE
    if (bytes < (size_t(4) << 20)) return;
    const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);  // advice: its result does not matter
#else
    (void)p, (void)bytes;
#endif
}

}  // namespace hg

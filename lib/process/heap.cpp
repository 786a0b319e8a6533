// heap.cpp — see heap.h.
#include "lib/process/heap.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace hg {

void keep_heap_top() {
#ifdef __GLIBC__
    mallopt(M_TOP_PAD, 16 << 20);
#endif
}

}  // namespace hg

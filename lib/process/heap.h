// heap.h — how the C heap of a long training job returns memory to the system.
//
// oneDNN's bf16 matmul (lib/kernels/matmul_bf16.h) takes one block of a few tens of KiB from
// the C heap inside each call and frees it before returning. glibc trims the top of its heap as
// soon as the free space there passes its threshold, so a block freed at the top goes back to
// the system after every product and is mapped again by the next (a system call and a TLB flush
// each time, hundreds of times a step for attention's small products). keep_heap_top() asks
// glibc to keep 16 MiB free at the top when it trims: the block then stays mapped from one call
// to the next. It changes the whole process's allocator, so the library never calls it itself;
// the apps that train or time steps do, at start. Elsewhere than glibc it does nothing.
#pragma once

namespace hg {

void keep_heap_top();

}  // namespace hg

// thread_buffer.h — scratch space a kernel needs beside its operands, one buffer per thread.
//
// thread_buffer<Tag>(n) is this thread's buffer of at least n numbers, 64-byte aligned, one
// buffer for each Tag (an empty type declared where the buffer is used, naming what it holds).
// It grows to the most that any call on this thread has asked for and is then kept: a kernel's
// scratch is allocated by its first call on each thread, and no later call of that size or less
// allocates. Nothing in it is kept for the caller from one call to the next.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace hg {

template <typename Tag, typename T = float>
T* thread_buffer(size_t n) {
    static thread_local std::vector<T> buffer;
    constexpr size_t slack = (64 + sizeof(T) - 1) / sizeof(T);  // room to align the start
    if (buffer.size() < n + slack) buffer.resize(n + slack);
    return reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(buffer.data()) + 63) / 64 * 64);
}

}  // namespace hg

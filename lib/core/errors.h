// errors.h — how handgrad reports what a user got wrong.
//
// Everything a user can get wrong (a flag, a file, a token, a size) throws hg::Error with one
// line that names the problem and the offending value. Each app catches it in main, prints
// "error: <message>" and exits 1. Invariants only a bug can break are assert()s instead.
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <utility>

namespace hg {

struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// fail("n_embd ({}) must be divisible by n_head ({})", C, NH) throws hg::Error.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
    throw Error(fmt::format(format, std::forward<Args>(args)...));
}

// check(cond, ...) is fail(...) unless cond holds.
template <typename... Args>
void check(bool cond, fmt::format_string<Args...> format, Args&&... args) {
    if (!cond) fail(format, std::forward<Args>(args)...);
}

}  // namespace hg

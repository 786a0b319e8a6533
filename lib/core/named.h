// named.h — an enum's values and their names (on the command line, in checkpoints) as one
// table, read both ways: name_of(table, value) and value_named(table, "name", "what").
#pragma once
#include <cstddef>
#include <string>

#include "lib/core/errors.h"

namespace hg {

template <typename E>
struct Named {
    E value;
    const char* name;
};

// The name of `value`, or "?" for a value the table lacks.
template <typename E, size_t N>
std::string name_of(const Named<E> (&table)[N], E value) {
    for (const Named<E>& n : table)
        if (n.value == value) return n.name;
    return "?";
}

// The value named `s`; otherwise hg::Error: "unknown <what> 's' (known: a, b, c)".
template <typename E, size_t N>
E value_named(const Named<E> (&table)[N], const std::string& s, const char* what) {
    std::string known;
    for (const Named<E>& n : table) {
        if (s == n.name) return n.value;
        known += (known.empty() ? "" : ", ") + std::string(n.name);
    }
    fail("unknown {} '{}' (known: {})", what, s, known);
}

}  // namespace hg

// catch.h — Catch2, version 2 (one header) or 3 (a compiled library with headers per part),
// whichever is installed, under the names the tests use: TEST_CASE, SECTION, CHECK, REQUIRE,
// CHECK_THAT with Catch::Contains (a string holds a piece) and Catch::Matchers::Equals, and
// Approx. Every test file includes this, never a Catch2 header itself.
#pragma once

#if __has_include(<catch2/catch_test_macros.hpp>)  // Catch2 3
#include <string>

#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

using Catch::Approx;
// Version 2's name for "the string contains this piece"; version 3 calls it ContainsSubstring
// and keeps Contains for ranges (not included here, so the name is free).
namespace Catch {
namespace Matchers {
inline StringContainsMatcher Contains(const std::string& piece, CaseSensitive cs = CaseSensitive::Yes) {
    return ContainsSubstring(piece, cs);
}
}  // namespace Matchers
using Matchers::Contains;
}  // namespace Catch
#else  // Catch2 2
#include <catch2/catch.hpp>
#endif

// The Catch2 v2 runner: one binary, every test; `make test` runs it.
#define CATCH_CONFIG_MAIN
// GCC 12 at -O1 (the sanitizer build) warns falsely inside Catch2's use of <regex>.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <catch2/catch.hpp>

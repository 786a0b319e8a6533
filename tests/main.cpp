// The Catch2 v2 runner: one binary, every test; `make test` runs it.
#define CATCH_CONFIG_MAIN
// GCC 12 at -O1 (the sanitizer build) warns falsely inside Catch2's use of <regex>.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <catch2/catch.hpp>

#include <cstdlib>

// The start-up cache (lib/train/startup_cache.h) off for the whole suite and the apps it runs:
// every `auto` measures, and no test writes into the home directory. Tests of the cache
// point HANDGRAD_CACHE_DIR at a directory of their own.
static const bool g_cache_off = [] { return setenv("HANDGRAD_CACHE_DIR", "off", 0) == 0; }();

// The Catch2 v2 runner: one binary, every test; `make test` runs it.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

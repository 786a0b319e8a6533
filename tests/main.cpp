// The test runner: one binary, every test; `make test` runs it. Catch2 2 builds its runner
// into this file (CATCH_CONFIG_RUNNER); Catch2 3 has it in its library.
#if __has_include(<catch2/catch_session.hpp>)
#include <catch2/catch_session.hpp>
#else
#define CATCH_CONFIG_RUNNER
// GCC 12 at -O1 (the sanitizer build) warns falsely inside Catch2's use of <regex>.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <catch2/catch.hpp>
#endif

#include <cstdlib>
#include <cstring>
#include <filesystem>

// The start-up cache (lib/train/startup_cache.h) of the whole suite and the apps it runs: a
// fresh directory of its own, removed at exit, so no test reads an earlier run's choices or
// writes into the home directory, and the apps of one suite see one another's choices as a
// user's runs would. Tests of the cache itself point HANDGRAD_CACHE_DIR elsewhere.
static char g_cache_dir[4096];
static const bool g_cache_set = [] {
    if (std::getenv("HANDGRAD_CACHE_DIR")) return false;
    const std::string dir = (std::filesystem::temp_directory_path() / "handgrad-test-cache-XXXXXX").string();
    if (dir.size() >= sizeof g_cache_dir) return false;
    std::strcpy(g_cache_dir, dir.c_str());
    if (!mkdtemp(g_cache_dir)) return false;
    setenv("HANDGRAD_CACHE_DIR", g_cache_dir, 1);
    std::atexit([] {
        std::error_code ec;
        std::filesystem::remove_all(g_cache_dir, ec);
    });
    return true;
}();

int main(int argc, char* argv[]) { return Catch::Session().run(argc, argv); }

// The build's dependency files are complete: every header of ours that a library source reaches,
// directly or through other headers, is listed in the .d file the compiler wrote for it, so make
// rebuilds the source when any of them changes. The SIMD kernels reach their *-inl.h headers
// through Highway's <hwy/foreach_target.h>, a system header; a dependency file that leaves out
// what system headers include (g++ -MMD) drops those, and an edit to bf16-inl.h then rebuilt
// nothing while `make test` passed on the old code.
#include "tests/catch.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "tests/app_runner.h"

namespace fs = std::filesystem;

// The project headers ("lib/...") a file includes, followed through the headers themselves.
static void project_includes(const std::string& file, std::set<std::string>& seen) {
    std::ifstream in(file);
    static const std::regex include(R"(^\s*#\s*include\s*"(lib/[^"]+)\")");
    std::string line;
    std::smatch m;
    while (std::getline(in, line))
        if (std::regex_search(line, m, include) && seen.insert(m[1]).second) project_includes(m[1], seen);
}

// The prerequisites a .d file lists for its object: the words of its first rule, joined across
// backslash-newlines.
static std::set<std::string> dependencies(const fs::path& d_file) {
    std::ifstream in(d_file);
    std::string text, line;
    while (std::getline(in, line)) {
        if (line.empty()) break;  // the first rule ends here (-MP's phony rules follow)
        text += line.back() == '\\' ? line.substr(0, line.size() - 1) + " " : line + " ";
        if (line.back() != '\\') break;
    }
    std::set<std::string> deps;
    std::istringstream words(text.substr(text.find(':') + 1));
    for (std::string w; words >> w;) deps.insert(w);
    return deps;
}

TEST_CASE("every header a library source reaches is in its dependency file", "[build]") {
    const fs::path obj = fs::path(hg::test::bin("")) / "obj";
    if (!fs::exists("lib") || !fs::exists(obj / "lib")) {
        WARN("skipped: needs the repository's lib/ and a build's obj/ (run from the repository)");
        return;
    }
    int sources = 0, simd_sources = 0;
    for (const auto& entry : fs::recursive_directory_iterator("lib")) {
        if (entry.path().extension() != ".cpp") continue;
        const std::string src = entry.path().string();
        const fs::path d_file = obj / fs::path(src).replace_extension(".d");
        INFO(src << " -> " << d_file.string());
        REQUIRE(fs::exists(d_file));
        std::set<std::string> wanted;
        project_includes(src, wanted);
        const std::set<std::string> listed = dependencies(d_file);
        for (const std::string& header : wanted) {
            INFO("header " << header);
            CHECK(listed.count(header) == 1);
        }
        sources++;
        std::ifstream in(src);
        simd_sources += std::string(std::istreambuf_iterator<char>(in), {}).find("hwy/foreach_target.h") !=
                        std::string::npos;
    }
    CHECK(sources > 40);
    CHECK(simd_sources > 5);  // the kernels whose headers come through Highway are among them
}

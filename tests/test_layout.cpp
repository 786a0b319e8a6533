// test_layout.cpp — lib/'s folders depend one way: no file of a folder includes a file of a folder
// later in the order docs/design.md states ("core → kernels → ... → train"), every folder is in
// that order, and the README's map lists the folders in it. Run from the repository root (as
// make test does).
#include "tests/catch.h"

#include <algorithm>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "tests/app_runner.h"

namespace fs = std::filesystem;
using hg::test::read_bytes;

namespace {

// The folders in the order design.md gives them, read from its one line "core → kernels → ...".
std::vector<std::string> stated_order() {
    const std::string design = read_bytes("docs/design.md");
    const std::regex line_re("\\n +(core( → [a-z_]+)+)\\n");
    std::smatch m;
    REQUIRE(std::regex_search(design, m, line_re));
    std::vector<std::string> order;
    const std::string line = m[1];
    const std::regex word_re("[a-z_]+");
    for (auto it = std::sregex_iterator(line.begin(), line.end(), word_re); it != std::sregex_iterator(); ++it)
        order.push_back(it->str());
    return order;
}

// Each `#include "lib/<folder>/..."` in `text`, as the folder's name.
std::vector<std::string> included_folders(const std::string& text) {
    static const std::regex inc_re("#include \"lib/([a-z_]+)/");
    std::vector<std::string> out;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), inc_re); it != std::sregex_iterator(); ++it)
        out.push_back((*it)[1]);
    return out;
}

int rank(const std::vector<std::string>& order, const std::string& folder) {
    const auto it = std::find(order.begin(), order.end(), folder);
    return it == order.end() ? -1 : int(it - order.begin());
}

}  // namespace

TEST_CASE("lib/'s folders include only folders before them in design.md's order", "[layout]") {
    REQUIRE(fs::is_directory("lib"));
    const std::vector<std::string> order = stated_order();
    REQUIRE(order.size() >= 8);
    int files = 0;
    for (const fs::directory_entry& dir : fs::directory_iterator("lib")) {
        if (!dir.is_directory()) continue;
        const std::string folder = dir.path().filename().string();
        INFO("folder lib/" << folder);
        REQUIRE(rank(order, folder) >= 0);  // every folder has its place in the order
        for (const fs::directory_entry& f : fs::directory_iterator(dir.path())) {
            INFO(f.path().string());
            for (const std::string& used : included_folders(read_bytes(f.path()))) {
                INFO("includes lib/" << used << "/");
                CHECK(rank(order, used) >= 0);
                CHECK(rank(order, used) <= rank(order, folder));
            }
            files++;
        }
    }
    CHECK(files > 50);
    // No source file sits at lib/'s top level: each belongs to a folder.
    for (const fs::directory_entry& e : fs::directory_iterator("lib")) {
        INFO(e.path().string());
        CHECK((e.is_directory() || e.path().extension() == ".in"));
    }
}

TEST_CASE("the README's map lists lib/'s folders in design.md's order", "[layout]") {
    const std::vector<std::string> order = stated_order();
    const std::string readme = read_bytes("README.md");
    const std::regex row_re("\\n\\| `([a-z_]+)/` \\|");
    std::vector<std::string> listed;
    for (auto it = std::sregex_iterator(readme.begin(), readme.end(), row_re); it != std::sregex_iterator(); ++it)
        listed.push_back((*it)[1]);
    CHECK(listed == order);
}

TEST_CASE("the layout check catches an include that points up the order", "[layout]") {
    // The check above on a made-up file of kernels/ that includes a layer: caught.
    const std::vector<std::string> order = stated_order();
    const std::vector<std::string> used =
        included_folders("#include \"lib/core/errors.h\"\n#include \"lib/layers/dropout.h\"\n");
    REQUIRE(used.size() == 2);
    CHECK(rank(order, used[0]) <= rank(order, "kernels"));
    CHECK_FALSE(rank(order, used[1]) <= rank(order, "kernels"));
}

// test_reading_path.cpp — docs/reading.md gives, for each of four reading tasks, the files and
// line ranges a reader reads, the functions each range holds and its line count. This keeps
// the page true as the code moves: every file exists, every range lies inside its file and holds
// every name the row gives, every count is its range's, every total its rows' sum, the summary's
// figures are the sections' totals, and the paths stay short (no task over 400 lines, all four
// at most 1,000). Run from the repository root (as make test does).
#include "tests/catch.h"

#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/app_runner.h"

namespace fs = std::filesystem;
using hg::test::read_bytes;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

// The cells of a Markdown table row "| a | b | c |", trimmed; empty for any other line.
std::vector<std::string> cells(const std::string& line) {
    std::vector<std::string> out;
    if (line.size() < 2 || line[0] != '|') return out;
    std::string cell;
    for (size_t i = 1; i < line.size(); i++) {
        if (line[i] != '|') {
            cell += line[i];
            continue;
        }
        const size_t a = cell.find_first_not_of(' '), b = cell.find_last_not_of(' ');
        out.push_back(a == std::string::npos ? "" : cell.substr(a, b - a + 1));
        cell.clear();
    }
    return out;
}

// The number in "**123**", "1,000" or "123"; -1 for anything else.
long number_in(std::string s) {
    std::string digits;
    for (char c : s)
        if (c >= '0' && c <= '9') digits += c;
        else if (c != '*' && c != ',' && c != ' ') return -1;
    return digits.empty() ? -1 : std::stol(digits);
}

struct Step {
    std::string file;        // repository path, from the link
    long first = 0, last = 0;  // the line range, 1-based, inclusive
    std::vector<std::string> names;  // the `identifiers` the row says the range holds
    long count = 0;
    std::string row;
};
struct Task {
    std::string title;
    std::vector<Step> steps;
    long total = -1;
};

// The page's tasks: each "## " section whose table has path rows "| [path](../path) | a–b | `name`
// ... | n |" and a "| | | **total** | **n** |" row.
std::vector<Task> read_tasks(const std::vector<std::string>& page) {
    std::vector<Task> tasks;
    const std::regex link_re(R"(^\[[^\]]*\]\(\.\./([^)#]+)\)$)");
    const std::regex range_re(R"(^(\d+)\s*(?:–|-)\s*(\d+)$)");
    const std::regex name_re("`([A-Za-z_][A-Za-z0-9_:]*)`");
    for (const std::string& line : page) {
        if (line.rfind("## ", 0) == 0) {
            tasks.push_back({line.substr(3), {}, -1});
            continue;
        }
        const std::vector<std::string> c = cells(line);
        if (tasks.empty() || c.size() != 4) continue;
        std::smatch link, range;
        if (std::regex_match(c[0], link, link_re) && std::regex_match(c[1], range, range_re)) {
            Step s{link[1], std::stol(range[1]), std::stol(range[2]), {}, number_in(c[3]), line};
            for (auto it = std::sregex_iterator(c[2].begin(), c[2].end(), name_re); it != std::sregex_iterator(); ++it)
                s.names.push_back((*it)[1]);
            tasks.back().steps.push_back(s);
        } else if (c[2] == "**total**") {
            tasks.back().total = number_in(c[3]);
        }
    }
    std::vector<Task> with_paths;
    for (const Task& t : tasks)
        if (!t.steps.empty()) with_paths.push_back(t);
    return with_paths;
}

bool holds_word(const std::vector<std::string>& lines, long first, long last, const std::string& name) {
    const std::string last_part = name.substr(name.rfind(':') == std::string::npos ? 0 : name.rfind(':') + 1);
    const std::regex word("(^|[^A-Za-z0-9_])" + last_part + "([^A-Za-z0-9_]|$)");
    for (long i = first; i <= last; i++)
        if (std::regex_search(lines[size_t(i - 1)], word)) return true;
    return false;
}

}  // namespace

TEST_CASE("docs/reading.md: every path it gives exists, holds what it names and counts its lines",
          "[docs][reading]") {
    REQUIRE(fs::exists("docs/reading.md"));  // run from the repository root
    const std::vector<Task> tasks = read_tasks(lines_of(read_bytes("docs/reading.md")));
    REQUIRE(tasks.size() == 4);
    long all = 0;
    for (const Task& task : tasks) {
        INFO("task: " << task.title);
        long sum = 0;
        for (size_t i = 0; i < task.steps.size(); i++) {
            const Step& s = task.steps[i];
            INFO("row: " << s.row);
            REQUIRE(fs::exists(s.file));
            const std::vector<std::string> lines = lines_of(read_bytes(s.file));
            CHECK(s.first >= 1);
            CHECK(s.first <= s.last);
            REQUIRE(s.last <= long(lines.size()));
            CHECK(s.count == s.last - s.first + 1);
            CHECK(!s.names.empty());
            for (const std::string& name : s.names) {
                INFO("name: " << name);
                CHECK(holds_word(lines, s.first, s.last, name));
            }
            for (size_t j = 0; j < i; j++)  // a line read twice would be counted twice
                if (task.steps[j].file == s.file) CHECK((s.last < task.steps[j].first || s.first > task.steps[j].last));
            sum += s.count;
        }
        CHECK(task.total == sum);
        CHECK(sum <= 400);
        all += sum;
    }
    CHECK(all <= 1000);

    // The summary table: one row per task, in the sections' order, its last figure the total.
    std::vector<long> after;
    bool in_summary = false;
    for (const std::string& line : lines_of(read_bytes("docs/reading.md"))) {
        const std::vector<std::string> c = cells(line);
        if (c.size() >= 3 && c[0] == "task") in_summary = true;
        else if (c.empty()) in_summary = false;
        else if (in_summary && c[0].find("---") == std::string::npos && c[0] != "all four")
            after.push_back(number_in(c.back()));
    }
    REQUIRE(after.size() == tasks.size());
    for (size_t i = 0; i < tasks.size(); i++) CHECK(after[i] == tasks[i].total);
}

TEST_CASE("docs/reading.md's checker sees a wrong count, a missing name and a range past the file",
          "[docs][reading]") {
    const fs::path dir = fs::temp_directory_path() / "handgrad_reading_test";
    fs::create_directories(dir);
    const std::string file = hg::test::write_file(dir / "x.h", "// x.h\nvoid x_forward();\nvoid x_backward();\n");
    const std::vector<std::string> page = {
        "## a task", "| file | lines | holds | count |", "|---|---|---|---|",
        "| [x.h](../x.h) | 1–2 | `x_backward` | 3 |", "| | | **total** | **3** |"};
    const std::vector<Task> tasks = read_tasks(page);
    REQUIRE(tasks.size() == 1);
    REQUIRE(tasks[0].steps.size() == 1);
    const Step& s = tasks[0].steps[0];
    CHECK(s.file == "x.h");
    CHECK(tasks[0].total == 3);
    CHECK(s.count != s.last - s.first + 1);  // 3 lines claimed for a range of 2
    const std::vector<std::string> lines = lines_of(read_bytes(file));
    CHECK(lines.size() == 3);                              // a range 1–4 would lie past the file
    CHECK_FALSE(holds_word(lines, 1, 2, "x_backward"));    // the name is on line 3
    CHECK(holds_word(lines, 1, 3, "x_backward"));
    CHECK_FALSE(holds_word(lines, 1, 3, "x_back"));        // whole words only
    fs::remove_all(dir);
}

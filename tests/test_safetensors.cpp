// test_safetensors.cpp — the checkpoint file format: round trips, every malformed file we can
// think of, truncation at every byte, foreign files, and saves that fail half way.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include "tests/catch.h"
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "lib/checkpoint/safetensors.h"
#include "lib/core/errors.h"
#include "lib/core/rng.h"

using namespace hg;
using namespace std::string_literals;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it at scope exit.
struct TempDir {
    std::string path;
    TempDir() {
        const char* base = std::getenv("TMPDIR");
        std::string templ = std::string(base && *base ? base : "/tmp") + "/handgrad-st-XXXXXX";
        std::vector<char> buf(templ.begin(), templ.end());
        buf.push_back('\0');
        REQUIRE(::mkdtemp(buf.data()) != nullptr);
        path = buf.data();
    }
    ~TempDir() {
        std::error_code ec;
        for (auto& e : fs::recursive_directory_iterator(path, ec))  // undo any chmod 0555
            if (e.is_directory(ec)) fs::permissions(e.path(), fs::perms::owner_all, fs::perm_options::add, ec);
        fs::remove_all(path, ec);
    }
    std::string operator/(const std::string& name) const { return path + "/" + name; }
};

std::string read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    REQUIRE(f.good());
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), std::streamsize(bytes.size()));
    REQUIRE(f.good());
}

std::string le64(uint64_t n) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; i++) s[i] = char(uint8_t(n >> (8 * i)));
    return s;
}

// A file from a header text and a data buffer, with the header length written correctly.
std::string st_bytes(const std::string& header, const std::string& buffer) {
    return le64(header.size()) + header + buffer;
}

// The hg::Error message of loading `path`; the test fails if load succeeds (any other
// exception type escapes and fails the test too).
std::string load_error(const std::string& path) {
    try {
        SafetensorsFile::load(path);
    } catch (const Error& e) {
        return e.what();
    }
    FAIL("loading " << path << " succeeded, but it should have thrown hg::Error");
    return "";
}

// Writes `bytes` as a file and checks that loading it fails with one line naming the file
// and containing `phrase`.
void expect_bad(const TempDir& dir, const std::string& label, const std::string& bytes,
                const std::string& phrase) {
    const std::string path = dir / (label + ".safetensors");
    write_bytes(path, bytes);
    const std::string msg = load_error(path);
    INFO("case: " << label << "\nmessage: " << msg);
    CHECK_THAT(msg, Contains(phrase));
    CHECK_THAT(msg, Contains(path));
    CHECK(msg.find('\n') == std::string::npos);
}

std::vector<std::string> dir_entries(const std::string& dir) {
    std::vector<std::string> names;
    for (auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

bool has_temp_file(const std::string& dir) {
    for (const std::string& n : dir_entries(dir))
        if (n.find(".tmp.") != std::string::npos) return true;
    return false;
}

// A small, valid file: two tensors and metadata (used by the truncation and fuzz tests).
std::string save_small(const std::string& path) {
    static const float a[6] = {1.5f, -2.25f, 3.0f, 0.0f, -0.0f, 1e-40f};
    static const int64_t ids[3] = {7, -1, INT64_MAX};
    SafetensorsWriter w;
    w.add("a", Dtype::F32, {2, 3}, a);
    w.add("ids", Dtype::I64, {3}, ids);
    w.set_metadata("iter", "42");
    w.save(path);
    return read_bytes(path);
}

// Runs w.save(path) in a forked child that first becomes user/group nobody (65534), for root,
// who ignores directory permissions. Returns 0 if save threw hg::Error (its message in *msg),
// 1 if it succeeded, 2 on another exception, 3 if privileges could not be dropped.
// The child only calls save and write(2), then _exit()s without running any destructors.
int save_as_nobody(const SafetensorsWriter& w, const std::string& path, const std::string& top, std::string* msg) {
    ::chmod(top.c_str(), 0755);  // mkdtemp made it 0700: let nobody traverse it
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::close(fds[0]);
        if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
        int code = 2;
        std::string text;
        try {
            w.save(path);
            code = 1;
        } catch (const Error& e) {
            text = e.what();
            code = 0;
        } catch (...) {
        }
        if (::write(fds[1], text.data(), text.size()) < 0) code = 2;
        ::_exit(code);
    }
    ::close(fds[1]);
    char buf[512];
    ssize_t n;
    while ((n = ::read(fds[0], buf, sizeof buf)) > 0) msg->append(buf, size_t(n));
    ::close(fds[0]);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    return WEXITSTATUS(status);
}

bool run_ok(const std::string& cmd) { return std::system(cmd.c_str()) == 0; }

}  // namespace

TEST_CASE("safetensors round trip: dtypes, 0-d to 4-d, metadata, bit-identical", "[safetensors][checkpoint]") {
    TempDir dir;
    // F32 with the values a careless reader mangles: NaN with a payload, -0, a subnormal, ±inf.
    const float nan_payload = [] {
        uint32_t bits = 0x7fc01234u;
        float f;
        std::memcpy(&f, &bits, 4);
        return f;
    }();
    std::vector<float> a = {1.0f, -0.0f, 1e-45f, INFINITY, -INFINITY, nan_payload,
                            3.14159f, -2.5e30f, 7.0f, 8.0f, 9.0f, 10.0f};  // (3, 4)
    std::vector<int64_t> ids = {0, -1, INT64_MIN, INT64_MAX, 123456789012345};  // (5,)
    std::vector<uint8_t> bytes = {0, 1, 2, 254, 255, 128, 7};                      // (7,): odd length
    float scalar = -42.5f;                                                         // ()
    std::vector<double> w4(2 * 1 * 3 * 2);                                         // (2, 1, 3, 2)
    for (size_t i = 0; i < w4.size(); i++) w4[i] = std::ldexp(double(i) + 0.1, int(i) - 6);
    std::vector<int32_t> i32 = {-5, 6};  // (1, 2)

    SafetensorsWriter w;
    w.add("a", Dtype::F32, {3, 4}, a.data());
    w.add("ids", Dtype::I64, {5}, ids.data());
    w.add("bytes", Dtype::U8, {7}, bytes.data());
    w.add("scalar", Dtype::F32, {}, &scalar);
    w.add("empty", Dtype::F32, {0, 3}, nullptr);  // 0 elements: null data is fine
    w.add("w4", Dtype::F64, {2, 1, 3, 2}, w4.data());  // starts at an odd offset: read via memcpy
    w.add("i32", Dtype::I32, {1, 2}, i32.data());
    w.set_metadata("config", R"({"n_layer": 4, "n_embd": 128})");
    w.set_metadata("iter", "1200");
    w.set_metadata("note", "h\xc3\xa9llo \xe2\x9c\x93");  // UTF-8 survives
    w.set_metadata("iter", "1300");                       // set again: replaces
    const std::string path = dir / "model.safetensors";
    w.save(path);
    CHECK(dir_entries(dir.path) == std::vector<std::string>{"model.safetensors"});  // no temp left

    SafetensorsFile loaded = SafetensorsFile::load(path);
    SafetensorsFile f = std::move(loaded);  // Entry::data must survive a move
    CHECK(f.names() == std::vector<std::string>{"a", "ids", "bytes", "scalar", "empty", "w4", "i32"});
    CHECK(f.metadata() == std::map<std::string, std::string>{{"config", R"({"n_layer": 4, "n_embd": 128})"},
                                                              {"iter", "1300"},
                                                              {"note", "h\xc3\xa9llo \xe2\x9c\x93"}});
    CHECK(f.has("a"));
    CHECK_FALSE(f.has("b"));
    CHECK(f.get("a").dtype == Dtype::F32);
    CHECK(f.get("a").shape == Shape{3, 4});
    CHECK(f.get("scalar").shape.ndim == 0);
    CHECK(f.get("scalar").nbytes() == 4);
    CHECK(f.get("empty").shape == Shape{0, 3});
    CHECK(f.get("empty").nbytes() == 0);
    CHECK(f.get("w4").begin == 12 * 4 + 5 * 8 + 7 + 4);  // contiguous in the order added

    // Bit-identical: compare the bytes, not the values (NaN != NaN, -0 == 0).
    std::vector<float> a2(12);
    f.read_f32("a", {3, 4}, a2.data());
    CHECK(std::memcmp(a2.data(), a.data(), a.size() * 4) == 0);
    std::vector<int64_t> ids2(5);
    f.read_i64("ids", {5}, ids2.data());
    CHECK(ids2 == ids);
    std::vector<uint8_t> bytes2(7);
    f.read_u8("bytes", {7}, bytes2.data());
    CHECK(bytes2 == bytes);
    float scalar2 = 0;
    f.read_f32("scalar", {}, &scalar2);
    CHECK(std::memcmp(&scalar2, &scalar, 4) == 0);
    std::vector<double> w42(w4.size());
    f.read_f64("w4", {2, 1, 3, 2}, w42.data());
    CHECK(std::memcmp(w42.data(), w4.data(), w4.size() * 8) == 0);
    std::vector<int32_t> i322(2);
    f.read_i32("i32", {1, 2}, i322.data());
    CHECK(i322 == i32);
    f.read_f32("empty", {0, 3}, nullptr);  // nothing to copy

    // Saving the same tensors again gives the same bytes (the header is deterministic).
    w.save(dir / "again.safetensors");
    CHECK(read_bytes(dir / "again.safetensors") == read_bytes(path));
}

TEST_CASE("safetensors header is padded with spaces to a multiple of 8", "[safetensors][checkpoint]") {
    TempDir dir;
    const float x[3] = {1, 2, 3};
    for (size_t len = 1; len <= 20; len++) {  // name lengths that hit every remainder mod 8
        SafetensorsWriter w;
        const std::string name(len, 'n');
        w.add(name, Dtype::F32, {3}, x);
        const std::string path = dir / "p.safetensors";
        w.save(path);
        const std::string b = read_bytes(path);
        uint64_t N = 0;
        for (int i = 7; i >= 0; i--) N = (N << 8) | uint8_t(b[i]);
        INFO("name length " << len << ", header length " << N);
        CHECK((8 + N) % 8 == 0);
        CHECK(b.size() == 8 + N + 12);
        const std::string header = b.substr(8, N);
        const size_t close = header.rfind('}');
        REQUIRE(close != std::string::npos);
        CHECK(N - (close + 1) < 8);                                        // padding shorter than 8
        CHECK(header.find_first_not_of(' ', close + 1) == std::string::npos);  // and only spaces
        CHECK(std::memcmp(b.data() + 8 + N, x, 12) == 0);                  // the buffer follows
        const auto j = nlohmann::json::parse(header);
        CHECK(j[name]["data_offsets"] == nlohmann::json::array({0, 12}));
        CHECK(j[name]["shape"] == nlohmann::json::array({3}));
        CHECK(j[name]["dtype"] == "F32");
    }
}

TEST_CASE("safetensors: hand-written file in the reference layout loads", "[safetensors][checkpoint]") {
    // What Python's safetensors.torch.save_file({"w": tensor([[1., 2.]])}, metadata={"k": "v"})
    // produces: compact JSON, space padding, __metadata__ first. Written out by hand here.
    TempDir dir;
    std::string header = R"({"__metadata__":{"k":"v"},"w":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]}})";
    header.append((8 - header.size() % 8) % 8, ' ');
    const float w[2] = {1.0f, 2.0f};
    write_bytes(dir / "ref.safetensors", st_bytes(header, std::string(reinterpret_cast<const char*>(w), 8)));
    SafetensorsFile f = SafetensorsFile::load(dir / "ref.safetensors");
    float out[2] = {0, 0};
    f.read_f32("w", {1, 2}, out);
    CHECK(out[0] == 1.0f);
    CHECK(out[1] == 2.0f);
    CHECK(f.metadata().at("k") == "v");
}

TEST_CASE("safetensors typed reads check name, dtype and shape", "[safetensors][checkpoint]") {
    TempDir dir;
    std::vector<float> x(64 * 128, 0.5f);
    SafetensorsWriter w;
    w.add("wte", Dtype::F32, {64, 128}, x.data());
    w.save(dir / "c.safetensors");
    SafetensorsFile f = SafetensorsFile::load(dir / "c.safetensors");
    std::vector<float> out(65 * 128);
    std::vector<int64_t> out64(64 * 128);
    auto error_of = [&](auto&& fn) -> std::string {
        try {
            fn();
        } catch (const Error& e) {
            return e.what();
        }
        return "(no error)";
    };
    CHECK_THAT(error_of([&] { f.read_f32("wte", {65, 128}, out.data()); }),
               Contains("tensor 'wte' has shape (64, 128), expected (65, 128)"));
    CHECK_THAT(error_of([&] { f.read_f32("wte", {64, 128, 1}, out.data()); }),
               Contains("has shape (64, 128), expected (64, 128, 1)"));
    CHECK_THAT(error_of([&] { f.read_i64("wte", {64, 128}, out64.data()); }),
               Contains("tensor 'wte' has dtype F32, expected I64"));
    CHECK_THAT(error_of([&] { f.read_f32("wpe", {64, 128}, out.data()); }), Contains("has no tensor 'wpe'"));
    CHECK_THAT(error_of([&] { f.get("wpe"); }), Contains(dir / "c.safetensors"));
    CHECK_NOTHROW(f.read_f32("wte", {64, 128}, out.data()));
    CHECK(out[64 * 128 - 1] == 0.5f);
}

TEST_CASE("safetensors writer rejects bad tensors", "[safetensors][checkpoint]") {
    const float x[4] = {};
    SafetensorsWriter w;
    w.add("x", Dtype::F32, {4}, x);
    CHECK_THROWS_WITH(w.add("x", Dtype::F32, {4}, x), Contains("added twice"));
    CHECK_THROWS_WITH(w.add("__metadata__", Dtype::F32, {4}, x), Contains("reserved"));
    CHECK_THROWS_WITH(w.add("y", Dtype::F32, {1, 1, 1, 1, 4}, x), Contains("5 dimensions"));
    CHECK_THROWS_WITH(w.add("z", Dtype::F32, {4}, nullptr), Contains("data is null"));
    CHECK_THROWS_WITH(w.add("big", Dtype::F32, {size_t(1) << 40, size_t(1) << 40}, x), Contains("too large"));
    TempDir dir;
    SafetensorsWriter bad;
    bad.add("caf\xe9", Dtype::F32, {4}, x);  // Latin-1, not UTF-8
    CHECK_THROWS_AS(bad.save(dir / "bad.safetensors"), Error);
    CHECK(dir_entries(dir.path).empty());
}

TEST_CASE("safetensors rejects every kind of malformed file with one clear line", "[safetensors][checkpoint]") {
    TempDir dir;
    const std::string buf16(16, '\x01');  // the data buffer of a (2, 2) F32 tensor
    auto one = [&](const std::string& entry) {  // a header with one entry "x" and buf16
        return st_bytes("{\"x\":" + entry + "}", buf16);
    };
    const std::string ok_entry = R"({"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})";
    // Sanity: the base case is valid, so each case below fails for the reason it names.
    write_bytes(dir / "ok.safetensors", one(ok_entry));
    CHECK_NOTHROW(SafetensorsFile::load(dir / "ok.safetensors"));

    CHECK_THAT(load_error(dir / "missing.safetensors"), Contains("No such file or directory"));
    CHECK_THAT(load_error(dir.path), Contains("is a directory"));
    expect_bad(dir, "empty", "", "is truncated: 0 bytes, a safetensors file has at least 8");
    expect_bad(dir, "five", "\x10\0\0\0\0"s, "is truncated: 5 bytes, a safetensors file has at least 8");
    expect_bad(dir, "len_too_big", le64(1000) + "{\"x\":1}", "is truncated: the header length is 1000");
    expect_bad(dir, "len_not_json", le64(1000) + "garbage",
               "not a safetensors file (header length 1000 exceeds file size 15)");
    expect_bad(dir, "len_zero", le64(0), "header is not valid JSON");
    expect_bad(dir, "bad_json", st_bytes("{\"x\": {", ""), "header is not valid JSON");
    expect_bad(dir, "bad_utf8", st_bytes("{\"\xff\xfe\":{}}", ""), "header is not valid JSON");
    expect_bad(dir, "array", st_bytes("[1, 2]", ""), "header is not a JSON object but array");
    expect_bad(dir, "number", st_bytes("42      ", ""), "header is not a JSON object but number");
    expect_bad(dir, "duplicate", st_bytes("{\"x\":" + ok_entry + ",\"x\":" + ok_entry + "}", buf16 + buf16),
               "duplicate key 'x'");
    expect_bad(dir, "entry_not_object", one("[1]"), "header entry for tensor 'x' is not an object");
    expect_bad(dir, "no_dtype", one(R"({"shape":[2,2],"data_offsets":[0,16]})"), "tensor 'x' has no \"dtype\"");
    expect_bad(dir, "dtype_number", one(R"({"dtype":4,"shape":[2,2],"data_offsets":[0,16]})"),
               "non-string \"dtype\"");
    expect_bad(dir, "dtype_unknown", one(R"({"dtype":"F17","shape":[2,2],"data_offsets":[0,16]})"),
               "unknown dtype 'F17'");
    expect_bad(dir, "no_shape", one(R"({"dtype":"F32","data_offsets":[0,16]})"), "has no \"shape\"");
    expect_bad(dir, "shape_string", one(R"({"dtype":"F32","shape":"2x2","data_offsets":[0,16]})"),
               "\"shape\" that is not an array");
    expect_bad(dir, "shape_negative", one(R"({"dtype":"F32","shape":[-2,-2],"data_offsets":[0,16]})"),
               "negative dimension");
    expect_bad(dir, "shape_float", one(R"({"dtype":"F32","shape":[2.0,2],"data_offsets":[0,16]})"),
               "non-integer dimension");
    expect_bad(dir, "shape_string_dim", one(R"({"dtype":"F32","shape":["2",2],"data_offsets":[0,16]})"),
               "non-integer dimension");
    expect_bad(dir, "shape_5d", one(R"({"dtype":"F32","shape":[1,1,2,2,1],"data_offsets":[0,16]})"),
               "5 dimensions, handgrad supports at most 4");
    expect_bad(dir, "shape_overflow",
               one(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]})"), "too large");
    expect_bad(dir, "no_offsets", one(R"({"dtype":"F32","shape":[2,2]})"), "has no \"data_offsets\"");
    expect_bad(dir, "offsets_one", one(R"({"dtype":"F32","shape":[2,2],"data_offsets":[16]})"),
               "expected two non-negative integers");
    expect_bad(dir, "offsets_negative", one(R"({"dtype":"F32","shape":[2,2],"data_offsets":[-16,0]})"),
               "expected two non-negative integers");
    expect_bad(dir, "offsets_reversed", one(R"({"dtype":"F32","shape":[2,2],"data_offsets":[16,0]})"),
               "reversed data_offsets [16, 0]");
    expect_bad(dir, "offsets_size", one(R"({"dtype":"F32","shape":[2,2],"data_offsets":[0,12]})"),
               "data_offsets [0, 12] (12 bytes), but shape (2, 2) of F32 needs 16 bytes");
    expect_bad(dir, "offsets_outside", one(R"({"dtype":"F32","shape":[2,2],"data_offsets":[16,32]})"),
               "outside the 16-byte data buffer");
    expect_bad(dir, "missing_bytes", st_bytes("{\"x\":" + ok_entry + "}", buf16.substr(0, 10)), "is truncated");
    expect_bad(dir, "trailing", st_bytes("{\"x\":" + ok_entry + "}", buf16 + "junk"),
               "4 trailing bytes after the last tensor");
    expect_bad(dir, "overlap",
               st_bytes(R"({"x":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
                        R"("y":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                        buf16),
               "tensors 'x' [0, 16) and 'y' [8, 16) overlap");
    expect_bad(dir, "gap",
               st_bytes(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("y":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})",
                        buf16),
               "gap of 4 bytes in the data buffer before tensor 'y'");
    expect_bad(dir, "gap_at_start",
               st_bytes(R"({"y":{"dtype":"F32","shape":[3],"data_offsets":[4,16]}})", buf16), "gap of 4 bytes");
    expect_bad(dir, "metadata_array", st_bytes(R"({"__metadata__":["a"]})", ""),
               "__metadata__ must map strings to strings");
    expect_bad(dir, "metadata_number", st_bytes(R"({"__metadata__":{"iter":1200}})", ""),
               "__metadata__ must map strings to strings, but 'iter' is 1200");

    // A header length beyond 100 MB is refused before anything else is read: a sparse 160 MB
    // file (no disk space used) whose first 8 bytes claim a 150 MB header.
    {
        const std::string path = dir / "huge_header.safetensors";
        write_bytes(path, le64(150'000'000) + "{");
        REQUIRE(::truncate(path.c_str(), 160'000'000) == 0);
        const std::string msg = load_error(path);
        CHECK_THAT(msg, Contains("not a safetensors file (header length 150000000 exceeds the 100000000 byte limit)"));
    }
}

TEST_CASE("safetensors: a valid file cut anywhere fails cleanly as truncated", "[safetensors][checkpoint]") {
    TempDir dir;
    const std::string full = save_small(dir / "full.safetensors");
    uint64_t N = 0;
    for (int i = 7; i >= 0; i--) N = (N << 8) | uint8_t(full[i]);
    REQUIRE(full.size() == 8 + N + 6 * 4 + 3 * 8);
    // The named cut points, then every other length too (the file is ~150 bytes).
    const std::string path = dir / "cut.safetensors";
    write_bytes(path, full.substr(0, 3));
    CHECK_THAT(load_error(path), Contains("is truncated: 3 bytes, a safetensors file has at least 8"));
    write_bytes(path, full.substr(0, 8 + N / 2));  // mid-header
    CHECK_THAT(load_error(path), Contains("is truncated: the header length is"));
    write_bytes(path, full.substr(0, 8 + N + 10));  // mid-data (inside tensor "a")
    CHECK_THAT(load_error(path), Contains("is truncated or corrupt: tensor 'a'"));
    for (size_t cut = 0; cut < full.size(); cut++) {
        write_bytes(path, full.substr(0, cut));
        INFO("cut at " << cut << " of " << full.size());
        CHECK_THAT(load_error(path), Contains("truncated"));
    }
    write_bytes(path, full);
    CHECK_NOTHROW(SafetensorsFile::load(path));
}

TEST_CASE("safetensors: corrupted headers throw hg::Error, never crash", "[safetensors][checkpoint]") {
    // Random byte edits in the length and header: load must either succeed (an edit inside a
    // metadata string, say) or throw hg::Error; anything else (another exception type, a
    // crash, an ASan report) fails. The sanitizer run makes this a small fuzz test.
    TempDir dir;
    const std::string full = save_small(dir / "full.safetensors");
    uint64_t N = 0;
    for (int i = 7; i >= 0; i--) N = (N << 8) | uint8_t(full[i]);
    const std::string path = dir / "fuzz.safetensors";
    const char interesting[] = "{}[],:\"0123456789-.eE \\xF";
    Rng rng(2024);
    int failed = 0, loaded = 0;
    for (int iter = 0; iter < 800; iter++) {
        std::string b = full;
        const int edits = 1 + int(rng.below(3));
        for (int e = 0; e < edits; e++) {
            size_t pos = rng.below(8 + N);
            b[pos] = rng.below(2) ? char(rng.below(256)) : interesting[rng.below(sizeof interesting - 1)];
        }
        write_bytes(path, b);
        try {
            SafetensorsFile f = SafetensorsFile::load(path);
            loaded++;
            for (const std::string& name : f.names()) CHECK(f.get(name).end <= b.size());
        } catch (const Error& e) {
            failed++;
            CHECK(std::string(e.what()).find('\n') == std::string::npos);
        }
    }
    INFO(failed << " rejected, " << loaded << " still valid");
    CHECK(failed > 500);  // almost every edit of a compact header breaks it
}

TEST_CASE("safetensors: foreign files are reported as not safetensors", "[safetensors][checkpoint]") {
    TempDir dir;
    std::string png = "\x89PNG\r\n\x1a\n"s + std::string("\0\0\0\rIHDR", 8);
    for (int i = 0; i < 200; i++) png += char(i * 37);
    expect_bad(dir, "image.png", png, "not a safetensors file (header length");
    expect_bad(dir, "notes.txt", "These are my notes about the training run.\nLoss went down.\n",
               "not a safetensors file (header length");
    expect_bad(dir, "config.json", "{\"n_layer\": 4, \"n_head\": 4}\n", "not a safetensors file (header length");
    expect_bad(dir, "eight.txt", "hello wo", "not a safetensors file (header length");
}

TEST_CASE("safetensors save is atomic: failures leave the old file and no temp file", "[safetensors][checkpoint]") {
    TempDir dir;
    const std::string sub = dir / "ckpt";
    REQUIRE(::mkdir(sub.c_str(), 0755) == 0);
    const std::string path = sub + "/model.safetensors";
    const std::string old_bytes = save_small(path);

    std::vector<float> big(256 * 1024, 0.25f);  // 1 MiB
    SafetensorsWriter w;
    w.add("big", Dtype::F32, {256, 1024}, big.data());
    w.set_metadata("iter", "2");

    auto old_is_intact = [&] {
        CHECK(read_bytes(path) == old_bytes);
        SafetensorsFile f = SafetensorsFile::load(path);
        CHECK(f.metadata().at("iter") == "42");
        CHECK_FALSE(has_temp_file(sub));
        CHECK(dir_entries(sub) == std::vector<std::string>{"model.safetensors"});
    };
    auto save_error = [&](const std::string& p) -> std::string {
        try {
            w.save(p);
        } catch (const Error& e) {
            return e.what();
        }
        FAIL("saving " << p << " succeeded, but it should have failed");
        return "";
    };

    SECTION("directory does not exist") {
        const std::string msg = save_error(dir / "no/such/dir/model.safetensors");
        CHECK_THAT(msg, Contains("cannot create") && Contains("No such file or directory"));
        old_is_intact();
        CHECK_FALSE(fs::exists(dir / "no"));
    }
    SECTION("directory became unwritable") {
        REQUIRE(::chmod(sub.c_str(), 0555) == 0);
        // Root ignores directory permissions; probe whether they bind for us.
        const std::string probe = sub + "/probe";
        int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT, 0644);
        if (fd >= 0) {
            ::close(fd);
            ::unlink(probe.c_str());
            // We are root: try the save in a child process that drops to user "nobody".
            std::string msg;
            switch (save_as_nobody(w, path, dir.path, &msg)) {
                case 0:
                    CHECK_THAT(msg, Contains("cannot create") && Contains("Permission denied"));
                    break;
                case 3:
                    WARN("directory permissions do not bind this user and it cannot drop privileges: "
                         "unwritable-directory case skipped (the disk-full section covers the same cleanup)");
                    break;
                default:
                    FAIL("save by an unprivileged child: " << msg);
            }
            old_is_intact();
        } else {
            const std::string msg = save_error(path);
            CHECK_THAT(msg, Contains("cannot create") && Contains("Permission denied"));
            old_is_intact();
        }
        REQUIRE(::chmod(sub.c_str(), 0755) == 0);
        old_is_intact();
    }
    SECTION("the disk fills up half way through the write") {
        // RLIMIT_FSIZE makes write(2) fail with EFBIG past 64 kB, a full disk in miniature that
        // binds root too. SIGXFSZ (default: kill the process) is ignored meanwhile.
        struct rlimit saved;
        REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
        struct rlimit small = saved;
        small.rlim_cur = 64 * 1024;
        auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
        REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
        std::string msg;
        try {
            w.save(path);
        } catch (const Error& e) {
            msg = e.what();
        }
        ::setrlimit(RLIMIT_FSIZE, &saved);
        std::signal(SIGXFSZ, old_handler);
        CHECK_THAT(msg, Contains("writing") && Contains("File too large"));
        old_is_intact();
    }
    SECTION("the rename fails (the target is a non-empty directory)") {
        const std::string target = sub + "/taken";
        REQUIRE(::mkdir(target.c_str(), 0755) == 0);
        write_bytes(target + "/keep", "x");
        const std::string msg = save_error(target);
        CHECK_THAT(msg, Contains("renaming"));
        CHECK(read_bytes(target + "/keep") == "x");
        fs::remove_all(target);
        old_is_intact();
    }
    SECTION("a successful save replaces the old file and leaves no temp file") {
        w.save(path);
        SafetensorsFile f = SafetensorsFile::load(path);
        CHECK(f.metadata().at("iter") == "2");
        CHECK(f.names() == std::vector<std::string>{"big"});
        CHECK(dir_entries(sub) == std::vector<std::string>{"model.safetensors"});
    }
    SECTION("a relative path in the current directory works") {
        const fs::path cwd = fs::current_path();
        fs::current_path(sub);
        std::string msg;
        try {
            w.save("model.safetensors");
        } catch (const Error& e) {
            msg = e.what();
        }
        fs::current_path(cwd);
        CHECK(msg.empty());
        CHECK(SafetensorsFile::load(path).metadata().at("iter") == "2");
        CHECK_FALSE(has_temp_file(sub));
    }
}

TEST_CASE("safetensors files read by an independent reader (Python)", "[safetensors][checkpoint]") {
    if (!run_ok("python3 -c 'import json, struct' >/dev/null 2>&1")) {
        WARN("python3 not available: cross-reader check skipped");
        return;
    }
    TempDir dir;
    const float a[6] = {1.5f, -2.25f, 3.0f, 0.5f, 8.0f, -1.0f};
    const int64_t ids[3] = {7, -1, 1000000000000};
    const uint8_t u[5] = {1, 2, 3, 4, 250};
    SafetensorsWriter w;
    w.add("a", Dtype::F32, {2, 3}, a);
    w.add("u", Dtype::U8, {5}, u);
    w.add("ids", Dtype::I64, {3}, ids);
    w.set_metadata("iter", "42");
    const std::string path = dir / "x.safetensors";
    w.save(path);

    // A reader written from the format description with the standard library only: it prints
    // "name dtype shape sum" per tensor, with the sum taken over the decoded values.
    const std::string script = dir / "read.py";
    write_bytes(script, R"PY(
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
buf = raw[8 + n:]
fmt = {"F32": "f", "I64": "q", "U8": "B"}
print("meta", header.pop("__metadata__")["iter"])
for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
    b, end = e["data_offsets"]
    vals = struct.unpack("<%d%s" % ((end - b) // struct.calcsize(fmt[e["dtype"]]), fmt[e["dtype"]]), buf[b:end])
    print(name, e["dtype"], "x".join(map(str, e["shape"])), repr(sum(vals)))
print("end", len(buf), (8 + n) % 8)
)PY");
    const std::string out_path = dir / "out.txt";
    REQUIRE(run_ok("python3 " + script + " " + path + " > " + out_path));
    CHECK(read_bytes(out_path) ==
          "meta 42\n"
          "a F32 2x3 9.75\n"
          "u U8 5 260\n"
          "ids I64 3 1000000000006\n"
          "end 53 0\n");

    // The real reference reader, if installed (usually it is not: then only a warning).
    if (!run_ok("python3 -c 'import safetensors, numpy' >/dev/null 2>&1")) {
        WARN("python3 safetensors/numpy not installed: reference-library check skipped");
        return;
    }
    const std::string ref = dir / "ref.py";
    write_bytes(ref, R"PY(
import sys
from safetensors.numpy import load_file
t = load_file(sys.argv[1])
print(float(t["a"].sum()), t["a"].shape, int(t["u"].sum()), int(t["ids"].sum()))
)PY");
    REQUIRE(run_ok("python3 " + ref + " " + path + " > " + out_path));
    CHECK(read_bytes(out_path) == "9.75 (2, 3) 260 1000000000006\n");
}

// safetensors.cpp — reading and writing safetensors files (format and guarantees: safetensors.h).
#include "lib/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "lib/checkpoint/atomic_file.h"

namespace hg {

// The format stores numbers little-endian and we copy tensor bytes straight into memory.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors.cpp assumes a little-endian host");

namespace {

using json = nlohmann::json;

// The reference implementation's cap on the header (100 MB). A real header is a few kB; a length
// above this means the first 8 bytes are not a length at all (a PNG, a text file, random bytes).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DtypeInfo {
    Dtype dtype;
    const char* name;
    size_t size;
};
constexpr DtypeInfo kDtypes[] = {
    {Dtype::BOOL, "BOOL", 1}, {Dtype::U8, "U8", 1},    {Dtype::I8, "I8", 1},
    {Dtype::F8_E5M2, "F8_E5M2", 1}, {Dtype::F8_E4M3, "F8_E4M3", 1},
    {Dtype::I16, "I16", 2},   {Dtype::U16, "U16", 2},  {Dtype::F16, "F16", 2},
    {Dtype::BF16, "BF16", 2}, {Dtype::I32, "I32", 4},  {Dtype::U32, "U32", 4},
    {Dtype::F32, "F32", 4},   {Dtype::F64, "F64", 8},  {Dtype::I64, "I64", 8},
    {Dtype::U64, "U64", 8},
};

const DtypeInfo& info(Dtype dtype) {
    for (const DtypeInfo& d : kDtypes)
        if (d.dtype == dtype) return d;
    fail("invalid Dtype value {}", int(dtype));  // only reachable by casting a bad int to Dtype
}

// a · b, or false if it overflows size_t (a hostile header can claim a (2^40, 2^40) tensor).
bool mul_ok(size_t a, size_t b, size_t* out) { return !__builtin_mul_overflow(a, b, out); }

std::string errno_str(int err) { return std::strerror(err); }

// A JSON value for an error message, cut short so a hostile header cannot flood the terminal.
std::string brief(const json& j) {
    std::string s = j.dump();
    return s.size() <= 40 ? s : s.substr(0, 37) + "...";
}

// Closes a file descriptor when it goes out of scope (on success and on every throw).
struct Fd {
    int fd = -1;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

// Reads up to n bytes, retrying short reads and EINTR; returns how many arrived (< n only at EOF).
size_t read_fully(int fd, void* buf, size_t n, const std::string& path) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = ::read(fd, static_cast<char*>(buf) + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) fail("{}: read failed: {}", path, errno_str(errno));
        if (r == 0) break;
        got += size_t(r);
    }
    return got;
}


// Parses one header entry {"dtype", "shape", "data_offsets"} into e (offsets not yet checked
// against the buffer: that needs every entry, see load()).
SafetensorsFile::Entry parse_entry(const std::string& path, const std::string& name, const json& j) {
    SafetensorsFile::Entry e;
    check(j.is_object(), "{}: header entry for tensor '{}' is not an object but {}", path, name, brief(j));

    // "dtype": one of the names in kDtypes.
    auto it = j.find("dtype");
    check(it != j.end(), "{}: tensor '{}' has no \"dtype\"", path, name);
    check(it->is_string(), "{}: tensor '{}' has a non-string \"dtype\": {}", path, name, brief(*it));
    check(dtype_from_name(it->get<std::string>(), &e.dtype), "{}: tensor '{}' has unknown dtype '{}'",
          path, name, it->get<std::string>());

    // "shape": an array of up to kMaxDims non-negative integers ([] is a scalar).
    it = j.find("shape");
    check(it != j.end(), "{}: tensor '{}' has no \"shape\"", path, name);
    check(it->is_array(), "{}: tensor '{}' has a \"shape\" that is not an array: {}", path, name,
          brief(*it));
    check(it->size() <= size_t(kMaxDims), "{}: tensor '{}' has {} dimensions, handgrad supports at most {}",
          path, name, it->size(), kMaxDims);
    size_t numel = 1;
    for (const json& d : *it) {
        // nlohmann types "3" as unsigned, "-3" as (signed) integer, "3.0" and "1e99" as float.
        check(!(d.is_number_integer() && !d.is_number_unsigned()),
              "{}: tensor '{}' has a negative dimension in shape {}", path, name, brief(*it));
        check(d.is_number_unsigned(), "{}: tensor '{}' has a non-integer dimension in shape {}", path,
              name, brief(*it));
        size_t n = d.get<size_t>();
        e.shape.dims[e.shape.ndim++] = n;
        check(mul_ok(numel, n, &numel), "{}: tensor '{}' is too large: shape {}", path, name, brief(*it));
    }
    size_t nbytes = 0;
    check(mul_ok(numel, dtype_size(e.dtype), &nbytes), "{}: tensor '{}' is too large: shape {}", path,
          name, brief(*it));

    // "data_offsets": [begin, end], non-negative integers, begin <= end, spanning exactly nbytes.
    it = j.find("data_offsets");
    check(it != j.end(), "{}: tensor '{}' has no \"data_offsets\"", path, name);
    check(it->is_array() && it->size() == 2 && (*it)[0].is_number_unsigned() &&
              (*it)[1].is_number_unsigned(),
          "{}: tensor '{}' has \"data_offsets\" {}, expected two non-negative integers [begin, end]",
          path, name, brief(*it));
    e.begin = (*it)[0].get<size_t>();
    e.end = (*it)[1].get<size_t>();
    check(e.begin <= e.end, "{}: tensor '{}' has reversed data_offsets [{}, {}]", path, name, e.begin,
          e.end);
    check(e.end - e.begin == nbytes,
          "{}: tensor '{}' has data_offsets [{}, {}] ({} bytes), but shape {} of {} needs {} bytes", path,
          name, e.begin, e.end, e.end - e.begin, e.shape.str(), dtype_name(e.dtype), nbytes);
    return e;
}

}  // namespace

size_t dtype_size(Dtype dtype) { return info(dtype).size; }
const char* dtype_name(Dtype dtype) { return info(dtype).name; }

bool dtype_from_name(const std::string& name, Dtype* dtype) {
    for (const DtypeInfo& d : kDtypes)
        if (name == d.name) {
            *dtype = d.dtype;
            return true;
        }
    return false;
}

// ---------------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------------

SafetensorsFile SafetensorsFile::load(const std::string& path) {
    SafetensorsFile file;
    file.path_ = path;

    Fd f;
    f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    check(f.fd >= 0, "cannot open {}: {}", path, errno_str(errno));
    struct stat st;
    check(::fstat(f.fd, &st) == 0, "cannot stat {}: {}", path, errno_str(errno));
    check(!S_ISDIR(st.st_mode), "{} is a directory, not a safetensors file", path);
    check(S_ISREG(st.st_mode), "{} is not a regular file", path);
    const uint64_t size = uint64_t(st.st_size);

    // 1. The header length: 8 bytes, little-endian, assembled byte by byte.
    uint8_t len8[8];
    check(size >= 8 && read_fully(f.fd, len8, 8, path) == 8,
          "{} is truncated: {} bytes, a safetensors file has at least 8", path, size);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--) header_len = (header_len << 8) | len8[i];

    // A length larger than the file is the usual sign of a foreign file (a PNG's first 8 bytes
    // read as a length are ~7·10^17) or of a cut-off file. A cut-off safetensors file still
    // starts its header with '{', which tells the two apart for the message.
    if (header_len > size - 8) {
        uint8_t first = 0;
        bool looks_like_json = size == 8 || (read_fully(f.fd, &first, 1, path) == 1 && first == '{');
        check(!(looks_like_json && header_len <= kMaxHeaderBytes),
              "{} is truncated: the header length is {} bytes, but only {} bytes follow it", path,
              header_len, size - 8);
        fail("{}: not a safetensors file (header length {} exceeds file size {})", path, header_len, size);
    }
    check(header_len <= kMaxHeaderBytes,
          "{}: not a safetensors file (header length {} exceeds the {} byte limit)", path, header_len,
          kMaxHeaderBytes);

    // 2. The header and the data buffer (the rest of the file), read whole.
    std::string header(header_len, '\0');
    const uint64_t buffer_len = size - 8 - header_len;
    file.buffer_.resize(buffer_len);
    check(read_fully(f.fd, header.data(), header_len, path) == header_len &&
              read_fully(f.fd, file.buffer_.data(), buffer_len, path) == buffer_len,
          "{} is truncated: it shrank while being read", path);

    // 3. Parse the JSON. nlohmann keeps the last of two equal keys silently, so a callback
    //    notes any top-level key seen twice (depth 1: keys of the outermost object).
    std::set<std::string> seen;
    std::string duplicate;
    json::parser_callback_t note_keys = [&](int depth, json::parse_event_t event, json& parsed) {
        if (event == json::parse_event_t::key && depth == 1 && !seen.insert(parsed.get<std::string>()).second &&
            duplicate.empty())
            duplicate = parsed.get<std::string>();
        return true;
    };
    json h;
    try {
        h = json::parse(header.begin(), header.end(), note_keys);
    } catch (const json::exception& e) {
        // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 9: ...";
        // keep the part after the bracketed id.
        // Bytes outside printable ASCII become '?': the "last read" part can quote raw bytes
        // of a binary file, which must not reach the terminal.
        std::string what = e.what();
        size_t cut = what.find("] ");
        if (cut != std::string::npos) what = what.substr(cut + 2);
        for (char& c : what)
            if (c < 0x20 || c > 0x7e) c = '?';
        fail("{}: header is not valid JSON ({})", path, what);
    }
    check(h.is_object(), "{}: header is not a JSON object but {}", path, h.type_name());
    check(duplicate.empty(), "{}: header has a duplicate key '{}'", path, duplicate);

    // 4. Each entry on its own (types, dtype, shape, byte count); __metadata__ must be str → str.
    std::vector<std::pair<std::string, Entry>> sorted;
    for (auto it = h.begin(); it != h.end(); ++it) {
        if (it.key() == "__metadata__") {
            check(it->is_object(), "{}: __metadata__ must map strings to strings, but is {}", path,
                  brief(*it));
            for (auto m = it->begin(); m != it->end(); ++m) {
                check(m->is_string(), "{}: __metadata__ must map strings to strings, but '{}' is {}", path,
                      m.key(), brief(*m));
                file.metadata_[m.key()] = m->get<std::string>();
            }
            continue;
        }
        sorted.emplace_back(it.key(), parse_entry(path, it.key(), *it));
    }

    // 5. All entries together: sorted by offset they must tile [0, buffer_len) exactly.
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
        return a.second.begin != b.second.begin ? a.second.begin < b.second.begin : a.second.end < b.second.end;
    });
    size_t covered = 0;  // the bytes [0, covered) belong to the tensors checked so far
    for (size_t i = 0; i < sorted.size(); i++) {
        const auto& [name, e] = sorted[i];
        check(e.end <= buffer_len,
              "{} is truncated or corrupt: tensor '{}' has data_offsets [{}, {}], outside the {}-byte "
              "data buffer",
              path, name, e.begin, e.end, buffer_len);
        if (i > 0)  // (the message names sorted[i - 1], and check() evaluates it even when passing)
            check(e.begin >= covered, "{}: tensors '{}' [{}, {}) and '{}' [{}, {}) overlap", path,
                  sorted[i - 1].first, sorted[i - 1].second.begin, sorted[i - 1].second.end, name, e.begin,
                  e.end);
        check(e.begin == covered, "{}: gap of {} bytes in the data buffer before tensor '{}' (at {})", path,
              e.begin - covered, name, covered);
        covered = e.end;
    }
    check(covered == buffer_len, "{}: {} trailing bytes after the last tensor (the tensors cover {} of {})",
          path, buffer_len - covered, covered, buffer_len);

    for (auto& [name, e] : sorted) {
        e.data = file.buffer_.data() + e.begin;
        file.order_.push_back(name);
        file.entries_.emplace(name, e);
    }
    return file;
}

const SafetensorsFile::Entry& SafetensorsFile::get(const std::string& name) const {
    auto it = entries_.find(name);
    check(it != entries_.end(), "{} has no tensor '{}'", path_, name);
    return it->second;
}

void SafetensorsFile::read(const std::string& name, Dtype dtype, const Shape& expected, void* out) const {
    const Entry& e = get(name);
    check(e.dtype == dtype, "{}: tensor '{}' has dtype {}, expected {}", path_, name, dtype_name(e.dtype),
          dtype_name(dtype));
    check(e.shape == expected, "{}: tensor '{}' has shape {}, expected {}", path_, name, e.shape.str(),
          expected.str());
    if (e.nbytes() > 0) std::memcpy(out, e.data, e.nbytes());
}

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------

void SafetensorsWriter::add(std::string name, Dtype dtype, std::vector<size_t> shape, const void* data) {
    check(name != "__metadata__", "cannot add a tensor named '__metadata__': the name is reserved");
    for (const Item& item : items_) check(item.name != name, "tensor '{}' added twice", name);
    check(shape.size() <= size_t(kMaxDims), "cannot add tensor '{}': {} dimensions, handgrad supports at most {}",
          name, shape.size(), kMaxDims);
    size_t nbytes = dtype_size(dtype);
    for (size_t n : shape) check(mul_ok(nbytes, n, &nbytes), "cannot add tensor '{}': too large", name);
    check(data != nullptr || nbytes == 0, "cannot add tensor '{}': data is null", name);
    items_.push_back({std::move(name), dtype, std::move(shape), data, nbytes});
}

void SafetensorsWriter::set_metadata(std::string key, std::string value) {
    metadata_[std::move(key)] = std::move(value);
}

void SafetensorsWriter::save(const std::string& path) const {
    // The header, in the order added (ordered_json keeps insertion order; plain json would sort),
    // with each tensor's bytes placed right after the previous one's.
    nlohmann::ordered_json h = nlohmann::ordered_json::object();
    if (!metadata_.empty()) h["__metadata__"] = metadata_;
    size_t offset = 0;
    for (const Item& item : items_) {
        h[item.name] = {{"dtype", dtype_name(item.dtype)},
                        {"shape", item.shape},
                        {"data_offsets", {offset, offset + item.nbytes}}};
        offset += item.nbytes;
    }
    std::string header;
    try {
        header = h.dump();
    } catch (const nlohmann::json::exception&) {  // dump() refuses strings that are not UTF-8
        fail("cannot save {}: a tensor name or metadata string is not valid UTF-8", path);
    }
    // Spaces (valid JSON whitespace) up to a multiple of 8, so the buffer starts 8-byte aligned
    // (8 + header) and a reader that maps the file can view F64/I64 tensors in place.
    header.append((8 - header.size() % 8) % 8, ' ');
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = uint8_t(uint64_t(header.size()) >> (8 * i));
    std::vector<Bytes> pieces = {{len8, 8}, {header.data(), header.size()}};
    for (const Item& item : items_) pieces.push_back({item.data, item.nbytes});

    write_file_atomically(path, pieces);
}

}  // namespace hg

// safetensors.h — the checkpoint file format: read (validating every byte), write (atomically).
//
// A safetensors file (https://github.com/huggingface/safetensors) is three parts:
//
//   [ N: u64, little-endian ][ N bytes of UTF-8 JSON header ][ the data buffer ]
//
// The header is one JSON object. Each key is a tensor name mapping to
//   {"dtype": "F32", "shape": [65, 128], "data_offsets": [begin, end]}
// where [begin, end) are byte offsets into the data buffer (not into the file); tensors are
// row-major, little-endian, packed back to back. An optional "__metadata__" key maps strings to
// strings (we keep the training config and the iteration there). Nothing else is in the file:
// no alignment inside the buffer, no compression, no pickles, so a reader can check it fully.
//
// What the reader guarantees: after load() returns, every tensor's bytes lie inside the file,
// no two tensors overlap, the tensors cover the buffer exactly (no gap, no trailing byte), and
// each tensor's byte count equals numel · dtype size. Anything else is one hg::Error line that
// names the file and the problem, e.g.
//   "ckpt.safetensors is truncated: 5 bytes, a safetensors file has at least 8".
//
// What the writer guarantees: save() either replaces the file with a complete new one or leaves
// the old one untouched (lib/checkpoint/atomic_file.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lib/core/tensor.h"

namespace hg {

// The element types safetensors defines (its names are the JSON spellings, "F32", "BF16", ...).
// handgrad itself writes F32 (weights, moments), I64 (e.g. token ids) and U8 (raw bytes); the
// rest are here so that files written by PyTorch/NumPy load and are reported precisely.
enum class Dtype { BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64 };

size_t dtype_size(Dtype dtype);        // bytes per element: F32 → 4
const char* dtype_name(Dtype dtype);   // "F32"
// "F32" → Dtype::F32; false if the name is not a safetensors dtype.
bool dtype_from_name(const std::string& name, Dtype* dtype);

// Collects tensors, then writes them as one safetensors file.
//
// add() does NOT copy: it keeps the data pointer, so the caller keeps the memory alive and
// unchanged until save() returns. Checkpoints point straight into the parameter and AdamW
// arenas, and copying tens of MB only to write them out again would double peak memory.
class SafetensorsWriter {
public:
    // shape: up to kMaxDims dimensions, {} for a scalar (0-d, one element).
    // data:  numel(shape) · dtype_size(dtype) bytes, row-major, native (little-endian) order.
    // Throws on a duplicate or reserved name, too many dimensions, or null data for a non-empty tensor.
    void add(std::string name, Dtype dtype, std::vector<size_t> shape, const void* data);
    // A "__metadata__" entry (string → string). Setting a key again replaces its value.
    void set_metadata(std::string key, std::string value);
    // Writes atomically (see top of file); throws hg::Error naming the step that failed and why.
    // Tensors go into the buffer in the order they were added, contiguous; the header is padded
    // with spaces so the buffer starts at a multiple of 8 bytes.
    void save(const std::string& path) const;

private:
    struct Item {
        std::string name;
        Dtype dtype;
        std::vector<size_t> shape;
        const void* data;  // not owned: see the class comment
        size_t nbytes;
    };
    std::vector<Item> items_;                    // in the order added = order in the buffer
    std::map<std::string, std::string> metadata_;
};

// A safetensors file read completely into memory and validated.
class SafetensorsFile {
public:
    struct Entry {
        Dtype dtype;
        Shape shape;                // ndim 0..kMaxDims
        size_t begin = 0, end = 0;  // byte range in the data buffer, end - begin = nbytes()
        const uint8_t* data = nullptr;  // → into this file's buffer (any alignment: use memcpy)
        size_t nbytes() const { return end - begin; }
    };

    // Reads the whole file and checks everything listed at the top of this header.
    static SafetensorsFile load(const std::string& path);

    bool has(const std::string& name) const { return entries_.count(name) != 0; }
    // Throws "ckpt.safetensors has no tensor 'wte.weight'" if absent.
    const Entry& get(const std::string& name) const;
    // Every tensor name, in buffer order (for files we wrote: the order they were added).
    std::vector<std::string> names() const { return order_; }
    const std::map<std::string, std::string>& metadata() const { return metadata_; }
    const std::string& path() const { return path_; }

    // Copies tensor `name` into out after checking its dtype and shape, e.g.
    //   "ckpt.safetensors: tensor 'wte' has shape (64, 128), expected (65, 128)".
    void read(const std::string& name, Dtype dtype, const Shape& expected, void* out) const;
    void read_f32(const std::string& name, const Shape& expected, float* out) const {  // out: expected
        read(name, Dtype::F32, expected, out);
    }
    void read_f64(const std::string& name, const Shape& expected, double* out) const {
        read(name, Dtype::F64, expected, out);
    }
    void read_i32(const std::string& name, const Shape& expected, int32_t* out) const {
        read(name, Dtype::I32, expected, out);
    }
    void read_i64(const std::string& name, const Shape& expected, int64_t* out) const {
        read(name, Dtype::I64, expected, out);
    }
    void read_u8(const std::string& name, const Shape& expected, uint8_t* out) const {
        read(name, Dtype::U8, expected, out);
    }

    // Move-only: each Entry::data points into buffer_, which a move carries along intact
    // (a moved std::vector keeps its allocation) but a copy would leave pointing at the original.
    SafetensorsFile(SafetensorsFile&&) = default;
    SafetensorsFile& operator=(SafetensorsFile&&) = default;
    SafetensorsFile(const SafetensorsFile&) = delete;
    SafetensorsFile& operator=(const SafetensorsFile&) = delete;

private:
    SafetensorsFile() = default;
    std::string path_;
    std::vector<uint8_t> buffer_;               // the data buffer (the bytes after the header)
    std::map<std::string, Entry> entries_;
    std::vector<std::string> order_;            // names sorted by begin offset
    std::map<std::string, std::string> metadata_;
};

}  // namespace hg

"""safetensors_io.py — reading and writing safetensors files in stdlib + numpy (the `safetensors`
package is not installed, and torch is not needed for it).

The format: [u64 little-endian header length N][N bytes of JSON header][data buffer]; the header
maps each tensor name to {dtype, shape, data_offsets: [begin, end) in the buffer}, and may hold
"__metadata__", a map of strings.
"""
import json
import struct
from collections import OrderedDict

import numpy as np

_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
           "I16": np.int16, "I8": np.int8, "U8": np.uint8, "U16": np.uint16, "U32": np.uint32,
           "U64": np.uint64, "BOOL": np.bool_}
_NAMES = {np.dtype(v): k for k, v in _DTYPES.items()}


def read_safetensors(path):
    """Returns (OrderedDict name -> numpy array, in buffer order; metadata dict)."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: {len(raw)} bytes, a safetensors file has at least 8")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: header of {n} bytes runs past the end of the file")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {}) or {}
    buf = memoryview(raw)[8 + n:]
    out = OrderedDict()
    for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        begin, end = e["data_offsets"]
        dt = np.dtype(_DTYPES[e["dtype"]]).newbyteorder("<")
        shape = tuple(e["shape"])
        count = int(np.prod(shape)) if shape else 1
        if end - begin != count * dt.itemsize or end > len(buf):
            raise ValueError(f"{path}: tensor '{name}' has a bad byte range")
        out[name] = np.frombuffer(buf[begin:end], dtype=dt).reshape(shape).copy()
    return out, meta


def write_safetensors(path, tensors, metadata=None):
    """tensors: iterable of (name, numpy array), written in that order. The header is laid out as
    handgrad's SafetensorsWriter does (compact JSON, metadata first with sorted keys, tensors in
    insertion order, padded with spaces to a multiple of 8), so a file handgrad wrote can be
    reproduced byte for byte."""
    header = OrderedDict()
    if metadata:
        header["__metadata__"] = OrderedDict(sorted(metadata.items()))
    blobs, offset = [], 0
    for name, a in tensors:
        a = np.ascontiguousarray(a)
        data = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = OrderedDict([("dtype", _NAMES[np.dtype(a.dtype.type)]), ("shape", list(a.shape)),
                                    ("data_offsets", [offset, offset + len(data)])])
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)

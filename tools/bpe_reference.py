#!/usr/bin/env python3
"""bpe_reference.py — GPT-2's byte-level BPE in plain Python, as an independent check of lib/bpe.

Written the way GPT-2 itself works (on strings of its byte alphabet, merging string pairs),
not the way lib/text/bpe.cpp works (on byte strings and token ids), so the two share only the rules:

  1. pre-tokenize with GPT-2's pattern (Python's `regex` module, which knows \\p{L} and \\p{N});
  2. map each piece's UTF-8 bytes to GPT-2's printable byte alphabet;
  3. merge: repeatedly take the adjacent pair with the lowest rank in vocab.bpe and join every
     occurrence of it, left to right, until no pair has a rank;
  4. look the pieces up in encoder.json.

Bytes that are not valid UTF-8 cannot reach a regex over text; here, as in lib/text/bpe.h, each
such byte is a pre-token of its own, and the valid runs between them are pre-tokenized apart.
"<|endoftext|>" in the input is plain text unless --special is given (then it is id 50256).

  tools/bpe_reference.py --dir DIR encode [--special] < bytes      ids on one line
  tools/bpe_reference.py --dir DIR decode < ids                     the bytes
  tools/bpe_reference.py --dir DIR split FILE                       nanoGPT's 90/10 token counts
  tools/bpe_reference.py --dir DIR table                            the C++ test table's ids

Needs Debian's python3-regex (apt install python3-regex); run with /usr/bin/python3.
"""
import argparse
import json
import sys

import regex

PATTERN = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
SPECIAL = "<|endoftext|>"


def byte_alphabet():
    """GPT-2's byte -> character table: printable Latin-1 bytes stand for themselves, the other
    68 bytes (controls, space, 0x7F-0xA0, 0xAD) get U+0100, U+0101, ... in byte order."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


class Bpe:
    def __init__(self, directory):
        with open(f"{directory}/encoder.json", encoding="utf-8") as f:
            self.encoder = json.load(f)
        self.decoder = {i: s for s, i in self.encoder.items()}
        with open(f"{directory}/vocab.bpe", encoding="utf-8") as f:
            lines = f.read().split("\n")
        merges = [tuple(line.split(" ")) for line in lines if line and not line.startswith("#version")]
        self.ranks = {pair: rank for rank, pair in enumerate(merges)}
        self.to_char = byte_alphabet()
        self.to_byte = {c: b for b, c in self.to_char.items()}
        self.cache = {}

    def merge(self, piece):
        """The BPE of one pre-token (a string in the byte alphabet) as a list of strings."""
        if piece in self.cache:
            return self.cache[piece]
        parts = list(piece)
        while len(parts) > 1:
            pairs = set(zip(parts, parts[1:]))
            best = min(pairs, key=lambda p: self.ranks.get(p, float("inf")))
            if best not in self.ranks:
                break
            joined, i = [], 0
            while i < len(parts):
                if i + 1 < len(parts) and (parts[i], parts[i + 1]) == best:
                    joined.append(parts[i] + parts[i + 1])
                    i += 2
                else:
                    joined.append(parts[i])
                    i += 1
            parts = joined
        self.cache[piece] = parts
        return parts

    def encode_bytes_piece(self, raw):
        return [self.encoder[s] for s in self.merge("".join(self.to_char[b] for b in raw))]

    def encode_ordinary(self, data):
        """bytes -> ids. surrogateescape turns each invalid byte into U+DC80 + (byte - 0x80),
        which no valid text contains, so the text splits at them into valid runs."""
        text = data.decode("utf-8", errors="surrogateescape")
        ids, run = [], []

        def flush():
            for piece in PATTERN.findall("".join(run)):
                ids.extend(self.encode_bytes_piece(piece.encode("utf-8")))
            run.clear()

        for ch in text:
            if 0xDC80 <= ord(ch) <= 0xDCFF:
                flush()
                ids.extend(self.encode_bytes_piece(bytes([ord(ch) - 0xDC00])))
            else:
                run.append(ch)
        flush()
        return ids

    def encode(self, data, special=False):
        if not special:
            return self.encode_ordinary(data)
        ids = []
        parts = data.split(SPECIAL.encode())
        for i, part in enumerate(parts):
            if i > 0:
                ids.append(self.encoder[SPECIAL])
            ids.extend(self.encode_ordinary(part))
        return ids

    def decode(self, ids):
        return bytes(self.to_byte[c] for i in ids for c in self.decoder[i])


# The strings of tests/test_bpe.cpp's table (bytes; the C++ test spells them the same way).
TABLE = [
    b"Hello world",
    b"hello",
    b"I'm here, they're not; you'll see what's what.",
    b"IT'S HE'S 'S 'st",
    b"don't DON'T",
    b"a  b   c",
    b"trailing   ",
    b"line\n\nnext\n",
    b" \n \n",
    b"  x",
    b"1234567 3.14159 2024",
    b"x=1;y!=2?!...",
    b"Hello, \xd0\xbc\xd0\xb8\xd1\x80!",                                   # Cyrillic
    b"\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c",                   # CJK
    b"\xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7",                           # Arabic
    b"\xf0\x9f\x91\x8b\xf0\x9f\x8f\xbd",                                   # waving hand + skin tone
    b"\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7",  # family (ZWJ)
    b"cafe\xcc\x81 caf\xc3\xa9",                                            # combining acute vs é
    b"a\xffb",                                                             # invalid byte
    b"\xe2\x80 x\xc3",                                                     # truncated sequences
    b"\xed\xa0\x80\xc0\xaf",                                               # surrogate, overlong
    b"<|endoftext|>",
    b"\tTab\x0bvt\xc2\x85nel\xe1\xa0\x8emvs",                              # \s edge cases
    b"a \xe1\xa0\x8ex \xc2\x85 y",
    b"\xc2\xa0nbsp  \xe3\x80\x80ideo",
]


def c_string(raw):
    """A C++ string literal for raw; a hex escape followed by a hex digit is closed with \"\"."""
    out, escaped = "", False
    for b in raw:
        c = chr(b)
        if escaped and c in "0123456789abcdefABCDEF":
            out += '""'
        escaped = False
        if c in '"\\':
            out += "\\" + c
        elif c == "\n":
            out += "\\n"
        elif c == "\t":
            out += "\\t"
        elif 0x20 <= b < 0x7F:
            out += c
        else:
            out += f"\\x{b:02x}"
            escaped = True
    return '"' + out + '"'


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True, help="the directory with encoder.json and vocab.bpe")
    sub = ap.add_subparsers(dest="cmd", required=True)
    enc = sub.add_parser("encode")
    enc.add_argument("--special", action="store_true", help="<|endoftext|> in the input is id 50256")
    sub.add_parser("decode")
    split = sub.add_parser("split")
    split.add_argument("file")
    sub.add_parser("table")
    args = ap.parse_args()
    bpe = Bpe(args.dir)
    if args.cmd == "encode":
        print(" ".join(map(str, bpe.encode(sys.stdin.buffer.read(), args.special))))
    elif args.cmd == "decode":
        sys.stdout.buffer.write(bpe.decode([int(t) for t in sys.stdin.read().split()]))
    elif args.cmd == "split":
        # nanoGPT's data/shakespeare/prepare.py: split the str (code points) 90/10, encode each.
        with open(args.file, encoding="utf-8") as f:
            data = f.read()
        n = len(data)
        train, val = data[: int(n * 0.9)], data[int(n * 0.9):]
        print(f"train {len(bpe.encode(train.encode()))} val {len(bpe.encode(val.encode()))}")
    else:
        for raw in TABLE:
            ids = bpe.encode(raw)
            assert bpe.decode(ids) == raw
            print(f"    {{{c_string(raw)}, {{{', '.join(map(str, ids))}}}}},")


if __name__ == "__main__":
    main()

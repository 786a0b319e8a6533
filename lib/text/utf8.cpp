// utf8.cpp — see utf8.h.
#include "lib/text/utf8.h"

namespace hg {

size_t utf8_next(std::string_view s, size_t pos, char32_t& cp) {
    const auto byte = [&](size_t i) { return (unsigned char)s[i]; };
    unsigned char b0 = byte(pos);
    size_t len;
    char32_t min;  // the smallest code point that needs `len` bytes (rejects overlong forms)
    if (b0 < 0x80) {
        cp = b0;
        return 1;
    } else if ((b0 & 0xE0) == 0xC0) {
        len = 2, min = 0x80, cp = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
        len = 3, min = 0x800, cp = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
        len = 4, min = 0x10000, cp = b0 & 0x07;
    } else {
        return 0;  // a continuation byte (10xxxxxx) where a character should start, or F8..FF
    }
    if (pos + len > s.size()) return 0;  // truncated at the end of the text
    for (size_t i = 1; i < len; i++) {
        if ((byte(pos + i) & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (byte(pos + i) & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

std::string utf8_encode(char32_t cp) {
    std::string out;
    if (cp < 0x80) {
        out += char(cp);
    } else if (cp < 0x800) {
        out += char(0xC0 | (cp >> 6));
        out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += char(0xE0 | (cp >> 12));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    } else {
        out += char(0xF0 | (cp >> 18));
        out += char(0x80 | ((cp >> 12) & 0x3F));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    }
    return out;
}

size_t utf8_char_bytes(std::string_view s, size_t pos) {
    char32_t cp;
    const size_t len = utf8_next(s, pos, cp);
    return len == 0 ? 1 : len;
}

size_t utf8_count_chars(std::string_view s) {
    size_t n = 0;
    for (size_t pos = 0; pos < s.size(); pos += utf8_char_bytes(s, pos)) n++;
    return n;
}

}  // namespace hg

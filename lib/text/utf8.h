// utf8.h — reading and writing UTF-8 (RFC 3629), for the tokenizers.
//
//   code points         bytes
//   U+0000..U+007F      0xxxxxxx
//   U+0080..U+07FF      110xxxxx 10xxxxxx
//   U+0800..U+FFFF      1110xxxx 10xxxxxx 10xxxxxx          (minus surrogates U+D800..U+DFFF)
//   U+10000..U+10FFFF   11110xxx 10xxxxxx 10xxxxxx 10xxxxxx
//
// Valid means: the right number of continuation bytes, the shortest form (no "overlong"
// encodings such as C0 80 for U+0000), no surrogates, nothing above U+10FFFF.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace hg {

// Decodes the code point starting at s[pos] into cp and returns its length in bytes (1 to 4),
// or 0 if the bytes there are not valid UTF-8 (cp is then unspecified).
size_t utf8_next(std::string_view s, size_t pos, char32_t& cp);

// The UTF-8 bytes of cp (cp <= U+10FFFF and not a surrogate).
std::string utf8_encode(char32_t cp);

// Characters as the data split and eval's bits per character count them: a valid UTF-8
// sequence is one character, and so is each byte that is not part of one.
size_t utf8_char_bytes(std::string_view s, size_t pos);  // the bytes of the character at s[pos]
size_t utf8_count_chars(std::string_view s);

}  // namespace hg

// text_file.h — a whole text file as bytes, or one error line saying why not.
#pragma once
#include <string>

namespace hg {

// The whole file as a string. Throws hg::Error for a missing or unreadable file
// ("cannot read data file 'x': No such file or directory") and for an empty one.
std::string read_text_file(const std::string& path);

}  // namespace hg

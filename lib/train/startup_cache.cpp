// startup_cache.cpp — see startup_cache.h.
#include "lib/train/startup_cache.h"

#include <cblas.h>
#include <fmt/core.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#ifdef HANDGRAD_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

namespace hg {

std::string machine_signature() {
    std::string model, flags;
    std::ifstream f("/proc/cpuinfo");
    for (std::string line; std::getline(f, line) && (model.empty() || flags.empty());) {
        const auto value = [&] {
            const size_t at = line.find_first_not_of(" \t", line.find(':') + 1);
            return at == std::string::npos ? std::string() : line.substr(at);
        };
        if (model.empty() && line.rfind("model name", 0) == 0) model = value();
        if (flags.empty() && line.rfind("flags", 0) == 0) flags = value();
    }
    const char* coretype = std::getenv("OPENBLAS_CORETYPE");
    std::string s = fmt::format("cpu {} flags {:x} cores {} openblas {} coretype {}", model,
                                std::hash<std::string>{}(flags), std::thread::hardware_concurrency(),
                                openblas_get_config(), coretype ? coretype : "-");
#ifdef HANDGRAD_ONEDNN
    const dnnl_version_t* v = dnnl_version();
    s += fmt::format(" onednn {}.{}.{}", v->major, v->minor, v->patch);
#endif
    return s;
}

std::string config_key(const GPTConfig& c) {
    return fmt::format("V {} T {} C {} NH {} L {} {} {} {}", c.vocab_size, c.block_size, c.n_embd, c.n_head, c.n_layer,
                       to_string(c.bias), c.tie_weights ? "tied" : "untied", describe_block(c));
}

std::string cache_path() {
    namespace fs = std::filesystem;
    const char* dir = std::getenv("HANDGRAD_CACHE_DIR");
    if (dir)
        return std::string(dir).empty() || std::string(dir) == "off" ? ""
                                                                     : (fs::path(dir) / "startup-choices.txt").string();
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    if (xdg && *xdg) return (fs::path(xdg) / "handgrad" / "startup-choices.txt").string();
    if (home && *home) return (fs::path(home) / ".cache" / "handgrad" / "startup-choices.txt").string();
    return "";
}

std::optional<std::string> cache_get(const std::string& key) {
    const std::string path = cache_path();
    if (path.empty()) return std::nullopt;
    std::ifstream f(path);
    std::optional<std::string> found;
    for (std::string line; std::getline(f, line);)
        if (line.size() > key.size() && line.compare(0, key.size(), key) == 0 && line[key.size()] == '\t')
            found = line.substr(key.size() + 1);
    return found;
}

void cache_put(const std::string& key, const std::string& value) {
    const std::string path = cache_path();
    if (path.empty() || key.find_first_of("\t\n") != std::string::npos || value.find('\n') != std::string::npos)
        return;
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    std::ofstream f(path, std::ios::app);
    f << key << '\t' << value << '\n';  // one short line per append: concurrent runs do not interleave it
}

std::string encode_choice(const RememberedChoice& c) {
    std::string s = c.taken;
    for (double ms : c.ms) s += fmt::format(" {:.6g}", ms);
    return s;
}

std::optional<RememberedChoice> decode_choice(const std::string& value, size_t options) {
    std::istringstream in(value);
    RememberedChoice c;
    if (!(in >> c.taken)) return std::nullopt;
    for (double ms; in >> ms;) c.ms.push_back(ms);
    if (!in.eof() || c.ms.size() != options) return std::nullopt;
    return c;
}

}  // namespace hg

// startup_cache.h — choices a run measured at start-up (startup_choice.h: which matmul backend,
// how many batch threads), remembered per machine so the next run with the same shapes skips
// the timing.
//
// One text file, startup-choices.txt, in $HANDGRAD_CACHE_DIR, else $XDG_CACHE_HOME/handgrad,
// else ~/.cache/handgrad; HANDGRAD_CACHE_DIR=off (or an empty value) turns the cache off. Each
// line is `key<TAB>value`; a later line wins over an earlier one with the same key. The key
// names what the measurement depends on: the CPU as /proc/cpuinfo describes it (model name and
// feature flags), the libraries' versions and settings (OPENBLAS_CORETYPE among them), the
// thread count and the shapes. A machine that changes any of those measures again. The cache
// is a convenience: a file that cannot be read or written is ignored, never an error.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "lib/model/config.h"

namespace hg {

// The CPU and the BLAS libraries as one string: part of every key.
std::string machine_signature();

std::optional<std::string> cache_get(const std::string& key);
void cache_put(const std::string& key, const std::string& value);
// A model's shapes as part of a key: what decides the sizes of its products.
std::string config_key(const GPTConfig& c);
// Where the file is ("" when the cache is off).
std::string cache_path();

// A remembered answer as a cache value: the option taken, then each option's ms, in the order
// the caller measured them ("onednn 7.6 14.9 9.2", "2 3040.1 3320.7"). decode_choice gives
// nothing for a value that does not read as a name and `options` times (an empty line, or one a
// build with other options wrote): the run measures again and rewrites it.
struct RememberedChoice {
    std::string taken;
    std::vector<double> ms;
};
std::string encode_choice(const RememberedChoice& c);
std::optional<RememberedChoice> decode_choice(const std::string& value, size_t options);

}  // namespace hg

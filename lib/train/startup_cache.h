// startup_cache.h — choices a run measured at start-up (which matmul backend, how many batch
// threads), remembered per machine so the next run with the same shapes skips the timing.
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

}  // namespace hg

// memory_check.cpp — see memory_check.h.
#include "lib/memory_check.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "lib/errors.h"
#include "lib/gpt.h"

namespace hg {

MemoryNeed memory_need(const GPTConfig& config, int batch_size, int T, int replicas, int state_copies) {
    config.validate();
    check(batch_size >= 1 && replicas >= 1 && batch_size % replicas == 0,
          "batch_size ({}) must be positive and split evenly over {} batch threads", batch_size, replicas);
    check(T >= 1 && T <= config.block_size, "sequence length {} must be in [1, block_size = {}]", T, config.block_size);
    // The largest arenas, estimated in double first so that no size_t product below can wrap:
    // the attention matrices (B, NH, T, T) twice, the logits (B, T, V) three times.
    const double rows = double(batch_size) / replicas;
    const double largest = rows * T * (2.0 * config.n_head * T + 3.0 * config.vocab_size + 20.0 * config.n_embd);
    check(largest * config.n_layer < 1e17, "batch {} × {} with this model needs more than 10^17 floats of "
          "activations: no machine holds that", batch_size, T);
    MemoryNeed need;
    need.batch_size = batch_size, need.T = T, need.replicas = replicas;
    const double P = double(parameter_count(config)), bytes = sizeof(float);
    need.state_bytes = bytes * P * (state_copies + replicas);
    const double one = double(gpt_activation_floats(config, 1, T)), two = double(gpt_activation_floats(config, 2, T));
    const double per_row = two - one, fixed = one - per_row;  // linear in the rows (the position table is fixed)
    need.bytes_per_row = bytes * per_row;
    need.activation_bytes = bytes * replicas * (fixed + per_row * rows);
    return need;
}

// The first number in a file ("max" and anything unreadable: nothing).
static std::optional<double> number_in(const char* path) {
    std::ifstream f(path);
    double x = 0;
    if (f >> x) return x;
    return std::nullopt;
}

std::optional<double> available_memory_bytes() {
    std::optional<double> available;
    std::ifstream f("/proc/meminfo");
    std::string line;
    while (std::getline(f, line)) {
        std::istringstream in(line);
        std::string key, unit;
        double kib = 0;
        if (in >> key >> kib >> unit && key == "MemAvailable:" && unit == "kB") available = kib * 1024;
    }
    // In a container, the cgroup's limit (cgroup v2) binds before the machine's memory does.
    const auto limit = number_in("/sys/fs/cgroup/memory.max"), used = number_in("/sys/fs/cgroup/memory.current");
    if (limit && used) available = std::min(available.value_or(*limit - *used), *limit - *used);
    return available;
}

static std::string gib(double bytes) { return fmt::format("{:.1f} GiB", bytes / double(1 << 30)); }

void check_memory(const MemoryNeed& need, double available, const std::string& batch_flag) {
    const double budget = 0.9 * available;
    if (need.total() <= budget) return;
    // The largest batch that fits: the activations grow by bytes_per_row with each row.
    const double spare = budget - need.state_bytes - (need.activation_bytes - need.bytes_per_row * need.batch_size);
    long long fits = need.bytes_per_row > 0 ? (long long)std::floor(spare / need.bytes_per_row) : 0;
    fits -= fits % need.replicas;
    const std::string hint = fits >= 1 ? fmt::format("try {}={}", batch_flag, fits)
                                       : std::string("not even one row fits: try a smaller model or block_size");
    fail("needs {} of activations for batch {} × {} (plus {} of weights and optimizer state); {} available; {}",
         gib(need.activation_bytes), need.batch_size, need.T, gib(need.state_bytes), gib(available), hint);
}

void check_memory_available(const MemoryNeed& need, const std::string& batch_flag) {
    if (const auto available = available_memory_bytes()) check_memory(need, *available, batch_flag);
}

}  // namespace hg

// memory_check.cpp — see memory_check.h.
#include "lib/model/memory_check.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "lib/core/errors.h"
#include "lib/model/gpt.h"

namespace hg {

MemoryNeed memory_need(const GPTConfig& config, int batch_size, int T, int replicas, int state_copies, bool with_bf16,
                       ActivationPlan plan) {
    config.validate();
    check(batch_size >= 1 && replicas >= 1 && batch_size % replicas == 0,
          "batch_size ({}) must be positive and split evenly over {} batch threads", batch_size, replicas);
    check(T >= 1 && T <= config.block_size, "sequence length {} must be in [1, block_size = {}]", T, config.block_size);
    // The largest arenas, estimated in double first so that no size_t product below can wrap:
    // materialized attention's matrices (B, NH, T, T) twice, the logits (B, T, V) at most twice
    // (the logits, then probs and dlogits in one buffer; one buffer for all three when the plan
    // keeps no logits).
    const double rows = double(batch_size) / replicas;
    const double matrices = plan.attention == AttentionKind::Materialized ? 2.0 * config.n_head * T : 0.0;
    const double largest = rows * T * (matrices + 2.0 * config.vocab_size + 20.0 * config.n_embd + config.n_head);
    check(largest * config.n_layer < 1e17, "batch {} × {} with this model needs more than 10^17 floats of "
          "activations: no machine holds that", batch_size, T);
    MemoryNeed need;
    need.config = config, need.batch_size = batch_size, need.T = T, need.replicas = replicas;
    need.state_copies = state_copies, need.with_bf16 = with_bf16, need.plan = plan;
    const double bytes = sizeof(float);
    need.state_bytes = bytes * double(parameter_count(config)) * (state_copies + replicas);
    need.activation_bytes = bytes * replicas * double(gpt_activation_floats(config, batch_size / replicas, T, plan));
    if (with_bf16) {
        need.state_bytes += 2.0 * double(parameter_count(config));
        need.activation_bytes += 2.0 * replicas * double(gpt_bf16_numbers(config, batch_size / replicas, T, plan));
    }
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

bool memory_fits(const MemoryNeed& need, double available) { return need.total() <= 0.9 * available; }

void check_memory(const MemoryNeed& need, double available, const std::string& batch_flag) {
    if (memory_fits(need, available)) return;
    // The largest batch (a multiple of the replicas) that fits, by bisection: the need grows with it.
    const auto fits = [&](int b) {
        return memory_fits(
            memory_need(need.config, b, need.T, need.replicas, need.state_copies, need.with_bf16, need.plan),
            available);
    };
    int lo = 0, hi = need.batch_size / need.replicas;  // in rows per replica: lo fits (or is 0), hi does not
    while (hi - lo > 1) {
        const int mid = lo + (hi - lo) / 2;
        (fits(mid * need.replicas) ? lo : hi) = mid;
    }
    const std::string hint = lo >= 1 ? fmt::format("try {}={}", batch_flag, lo * need.replicas)
                                     : std::string("not even one row fits: try a smaller model or block_size");
    fail("needs {} of activations for batch {} × {} (plus {} of weights and optimizer state); {} available; {}",
         gib(need.activation_bytes), need.batch_size, need.T, gib(need.state_bytes), gib(available), hint);
}

void check_memory_available(const MemoryNeed& need, const std::string& batch_flag) {
    if (const auto available = available_memory_bytes()) check_memory(need, *available, batch_flag);
}

}  // namespace hg

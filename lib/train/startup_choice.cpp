// startup_choice.cpp — see startup_choice.h.
#include "lib/train/startup_choice.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "lib/core/errors.h"
#include "lib/train/startup_cache.h"

namespace hg {

double carry_to_depth(double one_block, double two_blocks, int n_layer) {
    return one_block + double(n_layer - 1) * (two_blocks - one_block);
}

std::string StartupChoice::source() const {
    switch (by) {
        case ChosenBy::Only: return "the only option";
        case ChosenBy::RanksDiffer:
            return "the ranks' options differ (threads or memory per host), so the first, untimed";
        case ChosenBy::Remembered:
            return fmt::format("remembered from an earlier run on this machine ({})", cache_path());
        case ChosenBy::Measured: break;
    }
    return fmt::format("timed in {:.1f} s", seconds);
}

std::string StartupChoice::compared(const std::vector<std::string>& labels) const {
    std::string s = fmt::format("{:.3g} ms with {}", ms.at(taken), labels.at(taken));
    for (size_t i = 0; i < ms.size(); i++)
        if (i != taken) s += fmt::format(" against {:.3g} ms with {}", ms[i], labels.at(i));
    return s;
}

// FNV-1a: the same 64 bits for the same text in every process (std::hash promises that only
// within one).
static uint64_t text_hash(const std::string& s) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
    return h;
}

StartupChoice choose_at_startup(const std::vector<std::string>& options, const std::string& key,
                                const std::function<std::vector<double>()>& measure, const Dist& dist) {
    std::string full_key = key + " | options";
    for (const std::string& o : options) full_key += " " + o;
    StartupChoice c;
    if (dist.size > 1 && !dist_agree(dist, text_hash(full_key))) return c.by = ChosenBy::RanksDiffer, c;
    if (options.size() <= 1) return c;

    // Remembered: every rank must hold an answer, the same one, or all measure.
    const std::optional<RememberedChoice> seen = decode_choice(cache_get(full_key).value_or(""), options.size());
    const size_t at = seen ? size_t(std::find(options.begin(), options.end(), seen->taken) - options.begin())
                           : options.size();
    const uint64_t vote = at < options.size() ? at + 1 : 0;
    if (dist_agree(dist, vote) && vote > 0) {
        c.taken = at, c.ms = seen->ms, c.by = ChosenBy::Remembered;
        return c;
    }

    const auto t0 = std::chrono::steady_clock::now();
    c.ms = measure();
    check(c.ms.size() == options.size(), "a start-up choice timed {} options of {}", c.ms.size(), options.size());
    for (double& ms : c.ms) ms = dist_mean(dist, ms);
    c.taken = size_t(std::min_element(c.ms.begin(), c.ms.end()) - c.ms.begin());
    // Rank 0's pick for all: the means are the same numbers everywhere, but nothing rests on it.
    if (dist.size > 1)
        c.taken = size_t(std::lround(dist_mean(dist, dist.rank == 0 ? double(c.taken) : 0.0) * dist.size));
    c.seconds = dist_mean(dist, seconds_since(t0));
    c.by = ChosenBy::Measured;
    if (dist.rank == 0) cache_put(full_key, encode_choice({options[c.taken], c.ms}));
    return c;
}

}  // namespace hg

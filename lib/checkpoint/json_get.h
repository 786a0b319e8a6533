// json_get.h — one field of a JSON object, converted exactly, for the configs a checkpoint
// carries (checkpoint.cpp, train_config.cpp).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <type_traits>

#include "lib/core/errors.h"

namespace hg {

// out = j[key]. hg::Error naming `what` and the key for a value of another type, and for an
// integer field given a fraction or a number outside its type's range: nlohmann's own
// conversion would truncate 3.5 to 3, wrap 4294967361 to 65, and convert 1e300 with undefined
// behaviour.
template <typename T>
void json_get(const nlohmann::json& j, const char* key, T& out, const char* what) {
    const nlohmann::json& v = j.at(key);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        using limits = std::numeric_limits<T>;
        bool in_range = false;
        if (v.is_number_unsigned()) {
            in_range = v.get<uint64_t>() <= uint64_t(limits::max());
        } else if (v.is_number_integer()) {
            const int64_t x = v.get<int64_t>();
            in_range =
                x < 0 ? limits::is_signed && x >= int64_t(limits::min()) : uint64_t(x) <= uint64_t(limits::max());
        }
        check(in_range, "{} '{}' is not an integer in range: {}", what, key, v.dump());
        out = v.get<T>();
    } else {
        try {
            v.get_to(out);
        } catch (const nlohmann::json::exception&) {
            fail("{} '{}' has the wrong type: {}", what, key, v.dump());
        }
    }
}

}  // namespace hg

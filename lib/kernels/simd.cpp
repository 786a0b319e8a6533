// simd.cpp — target listing and forcing, for tests and for the apps' banner, and the bf16 probe
// (see simd.h). The vector width is asked of each target's own code (compiled once per target,
// like a kernel).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "lib/kernels/simd.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

size_t FloatLanes() { return hn::Lanes(hn::ScalableTag<float>()); }

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <hwy/targets.h>

#include "lib/kernels/simd.h"

namespace hg {
HWY_EXPORT(FloatLanes);

std::vector<SimdTarget> simd_targets() {
    std::vector<SimdTarget> out;
    for (int64_t t : hwy::SupportedAndGeneratedTargets()) out.push_back({t, hwy::TargetName(t)});
    return out;
}

void simd_force_target(int64_t target) { hwy::SetSupportedTargetsForTest(target); }

std::string simd_current_target() {
    int64_t best = hwy::SupportedTargets() & HWY_TARGETS;
    return hwy::TargetName(best & ~(best - 1));
}

int simd_vector_bits() { return int(HWY_DYNAMIC_DISPATCH(FloatLanes)() * 32); }

bool cpu_has_bf16_dot() {
#if defined(__x86_64__) && defined(__GNUC__)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
#else
    return false;
#endif
}

}  // namespace hg
#endif

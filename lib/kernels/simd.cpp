// simd.cpp — target listing and forcing, for tests and for the apps' banner (see simd.h).
#include "lib/kernels/simd.h"

#include <hwy/highway.h>
#include <hwy/targets.h>

namespace hg {

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

}  // namespace hg

#include "backends/cpu/simd_targets.h"

#include "backends/cpu/hwy_config.h"  // first: selects the targets

#include <hwy/highway.h>
#include <hwy/targets.h>

#include "core/error.h"

namespace ringlm::cpu {

namespace {
// Targets both compiled (HWY_TARGETS, under hwy_config.h) and supported, as a bit set.
int64_t usable_targets() {
  return hwy::SupportedTargets() & HWY_TARGETS;
}

std::vector<int64_t> unmocked_targets() {
  static const std::vector<int64_t> targets = [] {
    std::vector<int64_t> out;
    for (int64_t t = usable_targets(); t != 0; t &= t - 1) out.push_back(t & -t);
    return out;  // lower bits are better targets in Highway
  }();
  return targets;
}
}  // namespace

std::vector<std::string> available_simd_targets() {
  std::vector<std::string> names;
  for (int64_t t : unmocked_targets()) names.emplace_back(hwy::TargetName(t));
  return names;
}

std::string active_simd_target() {
  const int64_t t = usable_targets();
  return t == 0 ? std::string("none") : std::string(hwy::TargetName(t & -t));
}

void force_simd_target(const std::string& name) {
  const std::vector<int64_t> targets = unmocked_targets();
  if (name.empty()) {
    hwy::SetSupportedTargetsForTest(0);
    return;
  }
  for (int64_t t : targets) {
    if (name == hwy::TargetName(t)) {
      hwy::SetSupportedTargetsForTest(t);
      return;
    }
  }
  RINGLM_FAIL("SIMD target '", name, "' is not compiled in or not supported by this CPU");
}

}  // namespace ringlm::cpu

// Which Highway SIMD target the CPU kernels run on, and (for tests) forcing another one.
#pragma once

#include <string>
#include <vector>

namespace ringlm::cpu {

// Targets compiled into the kernels and supported by this CPU, best first ("AVX3", "AVX2",
// "EMU128").
std::vector<std::string> available_simd_targets();
// The target dispatch picks now.
std::string active_simd_target();
// Restricts dispatch to one target from available_simd_targets() (tests run every op on each);
// an empty name restores the default. Not thread-safe: call while no op runs.
void force_simd_target(const std::string& name);

}  // namespace ringlm::cpu

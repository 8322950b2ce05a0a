// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator. The engine keys it by the request's seed and counts by (token index,
// choice), so a token's random number depends only on what it is, never on the batch it ran in
// or on how often the request was preempted.
#pragma once

#include <array>
#include <cstdint>

namespace ringlm::engine {

inline std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter,
                                             std::array<uint32_t, 2> key) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{kMul0} * counter[0];
    const uint64_t p1 = uint64_t{kMul1} * counter[2];
    const auto hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const auto hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    counter = {hi1 ^ counter[1] ^ key[0], lo1, hi0 ^ counter[3] ^ key[1], lo0};
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return counter;
}

// A uniform double in [0, 1) with 53 random bits for (seed, choice, token index).
inline double philox_uniform(uint64_t seed, uint32_t choice, uint64_t index) {
  const auto out =
      philox4x32_10({static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), choice, 0u},
                    {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  const uint64_t bits = (uint64_t{out[0]} << 32) | out[1];
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

}  // namespace ringlm::engine

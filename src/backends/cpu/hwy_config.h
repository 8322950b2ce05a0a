// Highway target selection for the CPU backend; include before any hwy header in a kernel file.
//
// Each kernel file is compiled once per target. We keep the portable fallback (EMU128, the
// static baseline), AVX2 (Haswell+: AVX2/FMA/F16C) and AVX-512 (AVX3), and drop SSSE3/SSE4:
// they only add compile time on the 2-core CI machine and no x86 CPU we target lacks AVX2.
#pragma once

#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4)
#endif

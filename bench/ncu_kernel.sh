#!/usr/bin/env bash
# bench/ncu_kernel.sh OUT.txt KERNEL_REGEX [bench args...] — on the GPU machine: Nsight Compute's
# speed-of-light, occupancy and warp-stall sections for a few launches of the kernels matching
# KERNEL_REGEX during `ringlm bench --device cuda` (after RINGLM_NCU_SKIP matching launches:
# warm-up and graph capture). NCU_EXTRA_SECTIONS: more `--section NAME` arguments; NCU_ARGS: any
# other ncu arguments (say `--print-details all`, which should also print the sections' charts,
# such as the warp-stall reasons; not yet tried on the GPU machine).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/ncu_kernel.sh OUT.txt KERNEL_REGEX [bench args]}
kernel=${2:?usage: bench/ncu_kernel.sh OUT.txt KERNEL_REGEX [bench args]}
shift 2
"${NCU:-/usr/local/cuda/bin/ncu}" --kernel-name "regex:$kernel" \
  --launch-skip "${RINGLM_NCU_SKIP:-64}" --launch-count "${RINGLM_NCU_COUNT:-2}" \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section SchedulerStats ${NCU_EXTRA_SECTIONS:-} ${NCU_ARGS:-} \
  "${RINGLM:-build-cuda/ringlm}" bench --device cuda "$@" >"$out" 2>&1 || true
grep -E "Duration|Throughput|Achieved Occupancy|Registers|Issued Ipc|Stall|One or More|No Eligible|Block Limit|Theoretical Occ" "$out" | head -80

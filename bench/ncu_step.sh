#!/usr/bin/env bash
# bench/ncu_step.sh OUT.csv [bench args...] — on the GPU machine: per-kernel GPU time of about one
# decode step of `ringlm bench --device cuda` under Nsight Compute (ncu), summed by kernel name.
# Skips the first launches (warm-up and capture) and profiles the next RINGLM_NCU_COUNT (900).
# Caches are not flushed and clocks not locked between kernels (NCU_CACHE_CONTROL=all and
# NCU_CLOCK_CONTROL=base do): inside a decode step a kernel's input is usually still in L2 from
# the kernel before, so flushing would charge the small kernels DRAM latency they never pay.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/ncu_step.sh OUT.csv [bench args]}
shift
ncu=${NCU:-/usr/local/cuda/bin/ncu}
"$ncu" --metrics gpu__time_duration.sum --cache-control "${NCU_CACHE_CONTROL:-none}" \
  --clock-control "${NCU_CLOCK_CONTROL:-none}" --launch-skip "${RINGLM_NCU_SKIP:-2400}" \
  --launch-count "${RINGLM_NCU_COUNT:-900}" --csv "${RINGLM:-build-cuda/ringlm}" bench \
  --device cuda "$@" >"$out.raw" 2>/dev/null || true
python3 - "$out.raw" <<'PY' | tee "$out"
import csv, sys, collections
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
head = rows[0]; name_i = head.index("Kernel Name"); val_i = head.index("Metric Value")
total = collections.Counter(); count = collections.Counter()
for r in rows[1:]:
    v = float(r[val_i].replace(",", ""))
    total[r[name_i][:90]] += v; count[r[name_i][:90]] += 1
all_ns = sum(total.values())
print(f"kernels: {sum(count.values())}, total {all_ns/1e6:.3f} ms")
for k, v in total.most_common(25):
    print(f"{v/1e6:8.3f} ms {100*v/all_ns:5.1f} % x{count[k]:4d}  {k}")
PY

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
"$ncu" --metrics gpu__time_duration.sum,launch__grid_size --print-units base \
  --cache-control "${NCU_CACHE_CONTROL:-none}" --clock-control "${NCU_CLOCK_CONTROL:-none}" --launch-skip "${RINGLM_NCU_SKIP:-2400}" \
  --launch-count "${RINGLM_NCU_COUNT:-900}" --csv "${RINGLM:-build-cuda/ringlm}" bench \
  --device cuda "$@" >"$out.raw" 2>/dev/null || true
python3 - "$out.raw" <<'PY' | tee "$out"
# One row per (kernel, grid size): the launches of one kernel on different shapes (say a GEMV on
# the q/k/v, o, gate/up, down and LM-head weights) are told apart by their grids.
import csv, sys, collections
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
head = rows[0]
col = {name: head.index(name) for name in ("ID", "Kernel Name", "Metric Name", "Metric Value")}
launches = collections.defaultdict(dict)
for r in rows[1:]:
    launch = launches[r[col["ID"]]]
    launch["name"] = r[col["Kernel Name"]][:80]
    launch[r[col["Metric Name"]]] = float(r[col["Metric Value"]].replace(",", ""))
total = collections.Counter(); count = collections.Counter()
for launch in launches.values():
    key = f'{launch["name"]} [grid {int(launch.get("launch__grid_size", 0))}]'
    total[key] += launch.get("gpu__time_duration.sum", 0.0); count[key] += 1
all_ns = sum(total.values())
print(f"kernels: {sum(count.values())}, total {all_ns/1e6:.3f} ms")
for k, v in total.most_common(30):
    print(f"{v/1e6:8.3f} ms {100*v/all_ns:5.1f} % x{count[k]:4d} {v/count[k]/1e3:8.2f} us  {k}")
PY

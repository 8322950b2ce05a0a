#!/usr/bin/env bash
# bench/ncu_sass.sh OUTDIR KERNEL_REGEX [bench args...] — on the GPU machine: where one kernel's
# warps wait, per SASS instruction. Nsight Compute samples the warps' program counters and stall
# reasons (SourceCounters) for one launch of the kernels matching KERNEL_REGEX during
# `ringlm bench --device cuda` (after RINGLM_NCU_SKIP matching launches), writes the report
# (OUTDIR/kernel.ncu-rep), its SASS source page (OUTDIR/sass.csv: every instruction with its
# executed count and stall samples by reason) and prints the instructions with the most samples
# and the samples summed by reason and by opcode. Why: the warp-state totals say that a kernel
# waits, this says on which instruction (the load, the mma chain, the shuffle), so a change can
# target the instructions that cost the time.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/ncu_sass.sh OUTDIR KERNEL_REGEX [bench args]}
kernel=${2:?usage: bench/ncu_sass.sh OUTDIR KERNEL_REGEX [bench args]}
shift 2
mkdir -p "$out"
ncu=${NCU:-/usr/local/cuda/bin/ncu}
"$ncu" --kernel-name "regex:$kernel" --launch-skip "${RINGLM_NCU_SKIP:-64}" --launch-count 1 \
  --section SourceCounters --section WarpStateStats --section LaunchStats --section Occupancy \
  --section SpeedOfLight -f -o "$out/kernel" "${RINGLM:-build-cuda/ringlm}" bench --device cuda "$@" \
  >"$out/ncu.log" 2>&1 || true
"$ncu" -i "$out/kernel.ncu-rep" --page source --print-source sass --csv >"$out/sass.csv" 2>>"$out/ncu.log" || true
"$ncu" -i "$out/kernel.ncu-rep" --page details >"$out/details.txt" 2>>"$out/ncu.log" || true
grep -E "Duration|Registers|Achieved Occupancy|Issued Ipc|Warp Cycles Per Issued|No Eligible|\
DRAM Throughput|L1/TEX Cache Throughput|L2 Cache Throughput|Compute \(SM\) Throughput" \
  "$out/details.txt" | head -16 || true
python3 - "$out/sass.csv" <<'PY'
# The page's columns differ between Nsight versions: find the address, source, executed-count
# and stall-sample columns by name.
import csv, collections, sys
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
head_at = next((i for i, r in enumerate(rows) if any("Source" in c for c in r)), None)
if head_at is None:
    sys.exit("ncu_sass: no source page in " + sys.argv[1])
head, body = rows[head_at], [r for r in rows[head_at + 1:] if len(r) == len(rows[head_at])]
def col(*names):
    for name in names:
        for i, c in enumerate(head):
            if c.strip() == name:
                return i
    return None
src = col("Source")
addr = col("Address", "# Address")
samples = col("Warp Stall Sampling (All Samples)", "Warp Stall Sampling (All Cycles)")
executed = col("Instructions Executed", "Warp Instructions Executed")
reasons = [i for i, c in enumerate(head) if c.startswith("stall_") or c.startswith("Stall ")]
def num(r, i):
    try:
        return float(r[i].replace(",", "")) if i is not None and r[i] else 0.0
    except ValueError:
        return 0.0
total = sum(num(r, samples) for r in body) or 1.0
print(f"{len(body)} instructions, {total:.0f} stall samples; columns: {'|'.join(head)[:600]}")
print("top instructions by samples (share, executed, address, source):")
for r in sorted(body, key=lambda r: -num(r, samples))[:40]:
    where = r[addr] if addr is not None else ""
    print(f"  {100 * num(r, samples) / total:5.1f} % {num(r, executed):>10.0f}  {where:>6}  {r[src][:90]}")
def opcode(text):
    words = [w for w in text.split() if not w.startswith("@")]
    return words[0].split(".")[0] if words else "?"
by_op = collections.Counter()
for r in body:
    by_op[opcode(r[src])] += num(r, samples)
print("samples by opcode:", ", ".join(f"{k} {100 * v / total:.1f} %" for k, v in by_op.most_common(14)))
if reasons:
    by_reason = {head[i]: sum(num(r, i) for r in body) for i in reasons}
    top = sorted(by_reason.items(), key=lambda kv: -kv[1])[:10]
    print("samples by reason:", ", ".join(f"{k} {100 * v / total:.1f} %" for k, v in top))
PY

#!/usr/bin/env python3
"""Summarize a block trace (wip/block-trace.patch, on the GPU machine: RINGLM_CUDA_TRACE=FILE
ringlm bench --context N --batch 1 --gen 4 --repeat 1 ...; then block_trace_summary.py FILE):
the last decode step's launches in order — each launch's first start, its blocks' wait returns
and last end (µs from the step's start) — the time each kernel kind adds to the step, and for
layer 1's gate/up and q/k/v GEMVs how their blocks sit on the SMs and which SMs finish last."""
import struct
import sys
from collections import defaultdict

names = {16: "gemv", 17: "qkv(norm)", 19: "gate/up(norm)", 20: "o/down(acc)", 32: "attention",
         33: "merge", 34: "prepare", 18: "gemv(gated)", 21: "gemv(norm,acc)"}
records = list(struct.iter_unpack("<4I4Q", open(sys.argv[1], "rb").read()))
by_launch = defaultdict(list)
for launch, block, sm, tag, start, waited, end, _ in records:
    by_launch[launch].append((start, waited, end, tag))
rows = []
for launch, recs in by_launch.items():
    recs.sort()
    group = [recs[0]]
    for rec in recs[1:]:  # graph replays reuse launch ids: split at gaps over 1 ms
        if rec[0] - group[-1][0] > 1_000_000:
            rows.append(group)
            group = []
        group.append(rec)
    rows.append(group)
summary = []
for g in rows:
    starts = [x[0] for x in g]
    waits = [x[1] for x in g]
    ends = [x[2] for x in g]
    work = sorted(x[2] - x[1] for x in g)
    summary.append((min(starts), g[0][3], len(g), max(starts), min(waits), max(waits), max(ends),
                    work[len(work) // 2]))
summary.sort()
heads = [i for i, x in enumerate(summary) if x[1] == 16]  # the LM head: one per step
if len(heads) < 2:
    sys.exit("fewer than two steps traced")
lo, hi = heads[-2] + 1, heads[-1] + 1
t0 = summary[lo][0]
print(f"step: {(summary[hi - 1][6] - t0) / 1e3:.1f} us from its first traced start, {hi - lo} launches")
prev_end = summary[lo - 1][6]
totals = defaultdict(int)
for k, (start, tag, n, last_start, first_wait, last_wait, end, med) in enumerate(summary[lo:hi]):
    name = names.get(tag, str(tag))
    totals[name] += max(0, end - max(start, prev_end))
    if k < 24 or hi - lo - k <= 3:
        print(f"{k:4d} {name:>14} x{n:5d} | start {(start - t0) / 1e3:8.2f} .. {(last_start - t0) / 1e3:8.2f}"
              f" | waits return {(first_wait - t0) / 1e3:8.2f} .. {(last_wait - t0) / 1e3:8.2f}"
              f" | end {(end - t0) / 1e3:8.2f} (+{(end - prev_end) / 1e3:6.2f})"
              f" | median block after wait {med / 1e3:6.2f}")
    prev_end = max(prev_end, end)
print("time each kind adds past the previous end, over the step (us):")
for name, t in sorted(totals.items(), key=lambda kv: -kv[1]):
    print(f"  {name:>14} {t / 1e3:9.1f}")

# Per SM: how many blocks of each big launch of the step ran on it, and their work after the wait.
recs_by_sm = defaultdict(list)
for launch, block, sm, tag, start, waited, end, _ in records:
    if summary[lo][0] <= start <= summary[hi - 1][6]:
        recs_by_sm[sm].append((start, waited, end, tag, launch))
for want in (19, 17):
    # the step's first launch of this tag after the first 7 (layer 1)
    firsts = [x for x in summary[lo:hi] if x[1] == want]
    if len(firsts) < 2:
        continue
    s0, e0 = firsts[1][0], firsts[1][6]
    per_sm = {}
    for sm, rs in recs_by_sm.items():
        mine = [r for r in rs if r[3] == want and s0 <= r[0] <= e0]
        others = [r for r in rs if r[3] != want and r[2] > s0 and r[0] < e0]
        per_sm[sm] = (len(mine), max((r[2] - r[1] for r in mine), default=0), len(others),
                      sorted({names.get(r[3], str(r[3])) for r in others}))
    counts = defaultdict(int)
    for n, _, _, _ in per_sm.values():
        counts[n] += 1
    print(f"{names.get(want)} (layer 1): SMs by its blocks on them: {dict(sorted(counts.items()))}")
    slow = sorted(per_sm.items(), key=lambda kv: -kv[1][1])[:6]
    for sm, (n, work, n_other, other_names) in slow:
        print(f"  SM {sm:3d}: {n} blocks, slowest {work / 1e3:6.2f} us after its wait, "
              f"{n_other} other blocks overlapping ({', '.join(other_names)})")
    fast = sorted(per_sm.items(), key=lambda kv: kv[1][1])[:3]
    for sm, (n, work, n_other, other_names) in fast:
        print(f"  SM {sm:3d}: {n} blocks, slowest {work / 1e3:6.2f} us (fastest SMs)")

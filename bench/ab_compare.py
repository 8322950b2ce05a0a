"""Side-by-side decode rows of two or more `ringlm bench --json` outputs (scripts/gpu-ab): for
each (KV format, context, batch), every figure of each side in tokens/s, each side's mean over
the first side's, the last side's host time per step (`host_ms`: the GPU waiting for the host)
over its step time, and each side's mean share of the roofline (`of_roofline`, when the runs had
--peak-gb-s and --peak-tflop-s).

Usage: python3 bench/ab_compare.py A.jsonl B.jsonl [C.jsonl ...]
"""
import collections
import json
import sys


def load(path):
    runs, host = collections.defaultdict(list), collections.defaultdict(list)
    roofline = collections.defaultdict(list)
    for line in open(path):
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if "context" in row:
            key = (row["kv_format"], row["context"], row["batch"])
            runs[key].append(row["decode_tok_s"])
            if "host_ms" in row:
                host[key].append(row["host_ms"] / row["step_ms"])
            if "of_roofline" in row:
                roofline[key].append(row["of_roofline"])
    return runs, host, roofline


def mean(values):
    return sum(values) / len(values) if values else float("nan")


def main():
    loaded = [load(path) for path in sys.argv[1:]]
    sides, host = [runs for runs, _, _ in loaded], loaded[-1][1]
    roofs = [roof for _, _, roof in loaded]
    names = "ABCDEFGH"[:len(sides)]
    head = " | ".join(f"{n + ' tok/s':>20}" for n in names)
    ratios = " ".join(f"{n}/A" for n in names[1:])
    print(f"{'kv':>10} {'ctx':>6} {'B':>4} | {head} | {ratios} | host/step | of roofline")
    keys = set().union(*sides)
    for key in sorted(keys, key=lambda k: (k[0], k[1], k[2])):
        runs = [side.get(key, []) for side in sides]
        cells = " | ".join(f"{' '.join(f'{v:.1f}' for v in r):>20}" for r in runs)
        base = mean(runs[0])
        ratio = " ".join(f"{mean(r) / base:.3f}" for r in runs[1:])
        share = f"{100 * mean(host[key]):.1f} %" if host.get(key) else "-"
        roof = "/".join(f"{100 * mean(r[key]):.1f}" if r.get(key) else "-" for r in roofs)
        print(f"{key[0]:>10} {key[1]:>6} {key[2]:>4} | {cells} | {ratio} | {share} | {roof} %")


if __name__ == "__main__":
    main()

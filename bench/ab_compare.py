"""Side-by-side decode rows of two or more `ringlm bench --json` outputs (scripts/gpu-ab): for
each (KV format, context, batch), every figure of each side in tokens/s and each side's mean over
the first side's.

Usage: python3 bench/ab_compare.py A.jsonl B.jsonl [C.jsonl ...]
"""
import collections
import json
import sys


def load(path):
    runs = collections.defaultdict(list)
    for line in open(path):
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if "context" in row:
            runs[(row["kv_format"], row["context"], row["batch"])].append(row["decode_tok_s"])
    return runs


def mean(values):
    return sum(values) / len(values) if values else float("nan")


def main():
    sides = [load(path) for path in sys.argv[1:]]
    names = "ABCDEFGH"[:len(sides)]
    head = " | ".join(f"{n + ' tok/s':>20}" for n in names)
    ratios = " ".join(f"{n}/A" for n in names[1:])
    print(f"{'kv':>10} {'ctx':>6} {'B':>4} | {head} | {ratios}")
    keys = set().union(*sides)
    for key in sorted(keys, key=lambda k: (k[0], k[1], k[2])):
        runs = [side.get(key, []) for side in sides]
        cells = " | ".join(f"{' '.join(f'{v:.1f}' for v in r):>20}" for r in runs)
        base = mean(runs[0])
        ratio = " ".join(f"{mean(r) / base:.3f}" for r in runs[1:])
        print(f"{key[0]:>10} {key[1]:>6} {key[2]:>4} | {cells} | {ratio}")


if __name__ == "__main__":
    main()

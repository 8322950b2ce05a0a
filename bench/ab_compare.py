"""Side-by-side decode rows of two `ringlm bench --json` outputs (scripts/gpu-ab): for each
(KV format, context, batch), every A and B figure in tokens/s, the means, and B / A.

Usage: python3 bench/ab_compare.py A.jsonl B.jsonl
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


def main():
    a, b = load(sys.argv[1]), load(sys.argv[2])
    print(f"{'kv':>10} {'ctx':>6} {'B':>4} | {'A tok/s':>20} | {'B tok/s':>20} | B/A")
    for key in sorted(set(a) | set(b), key=lambda k: (k[0], k[1], k[2])):
        ra, rb = a.get(key, []), b.get(key, [])
        mean_a = sum(ra) / len(ra) if ra else float("nan")
        mean_b = sum(rb) / len(rb) if rb else float("nan")
        fa = " ".join(f"{v:.1f}" for v in ra)
        fb = " ".join(f"{v:.1f}" for v in rb)
        print(f"{key[0]:>10} {key[1]:>6} {key[2]:>4} | {fa:>20} | {fb:>20} | {mean_b / mean_a:.3f}")


if __name__ == "__main__":
    main()

"""One line per `ringlm bench --json` row in every *.jsonl under a folder (scripts/gpu-quick).

Usage: python3 bench/summarize_jsonl.py DIR
"""
import glob
import json
import os
import sys


def describe(row):
    if row.get("engine") == "transformers":
        return (f"transformers {row['transformers']} (torch {row['torch']}, {row['mode']}) "
                f"B={row['batch']}: decode {row['decode_tok_s']:.1f} tok/s")
    model = os.path.basename(row.get("model", ""))
    if "context" in row:
        return (f"{model} kv={row['kv_format']} ctx={row['context']} B={row['batch']}: "
                f"{row['decode_tok_s']:.1f} tok/s, {row['step_ms']:.3f} ms/step, "
                f"{row['achieved_gb_s']:.0f} GB/s, KV held {row.get('kv_resident_bytes', 0) / 1e9:.2f} GB"
                f" (all-full {row.get('kv_full_attention_bytes', 0) / 1e9:.2f} GB), "
                f"rows that fit {row.get('max_rows_at_kv_memory')}"
                + (f", parts {row['decode_part_limit']}" if "decode_part_limit" in row else ""))
    return (f"{model} prompt={row.get('prompt_len')} B={row['batch']}: prefill "
            f"{row.get('prefill_tok_s', 0):.0f} tok/s, decode {row.get('decode_tok_s', 0):.1f} tok/s")


def main():
    for path in sorted(glob.glob(os.path.join(sys.argv[1], "**", "*.jsonl"), recursive=True)):
        for line in open(path):
            line = line.strip()
            if not line:
                continue
            try:
                print(os.path.basename(path), describe(json.loads(line)))
            except (ValueError, KeyError):
                print(os.path.basename(path), line[:200])


if __name__ == "__main__":
    main()

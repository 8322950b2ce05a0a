#!/usr/bin/env python3
"""Markdown table of bench/gpu_decode.sh (or scripts/gpu-quick's decode stage) results: ringlm
decode vs the roofline and vs transformers at the same batch size. The roofline is the runs' own
(`roofline_step_ms`: the longer of the step's bytes at the copy bandwidth and its FLOPs at the
matmul peak, when bench had --peak-gb-s/--peak-tflop-s), else the bytes at COPY_BW.
Usage: decode_table.py OUTDIR"""
import json
import sys
from pathlib import Path

COPY_BW = 4.27e12  # H200 device-to-device copy, measured (the GPU machine's notes)


def read(path):
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.startswith("{")]


def main():
    out = Path(sys.argv[1])
    ringlm = read(out / "ringlm_decode.jsonl") or read(out / "decode.jsonl")
    torch = {r["batch"]: r for r in read(out / "torch_decode.jsonl")}
    print("| context | batch | ringlm tok/s | ms/step | GB/step | TFLOP/step | roofline tok/s |"
          " of roofline | transformers tok/s (prompt 128) | ringlm / transformers |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in ringlm:
        roof_s = r["roofline_step_ms"] / 1e3 if "roofline_step_ms" in r else \
            r["bytes_per_step"] / COPY_BW
        roof = r["batch"] / roof_s
        flops = f'{r["flops_per_step"] / 1e12:.3f}' if "flops_per_step" in r else ""
        t = torch.get(r["batch"]) if r["context"] == 512 else None
        tt = f'{t["decode_tok_s"]:.1f}' if t else ""
        ratio = f'{r["decode_tok_s"] / t["decode_tok_s"]:.2f}x' if t else ""
        print(f'| {r["context"]} | {r["batch"]} | {r["decode_tok_s"]:.1f} | {r["step_ms"]:.2f} |'
              f' {r["bytes_per_step"] / 1e9:.2f} | {flops} | {roof:.0f} |'
              f' {100 * r["decode_tok_s"] / roof:.1f} % | {tt} | {ratio} |')
    for r in read(out / "ringlm_prefill.jsonl"):
        print(f'\nprefill batch {r["batch"]} prompt {r["prompt_len"]}: '
              f'{r["prefill_tok_s"]:.0f} tok/s')


if __name__ == "__main__":
    main()

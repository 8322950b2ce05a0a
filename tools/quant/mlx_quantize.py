#!/usr/bin/env python3
"""Writes an MLX-style affine-quantized copy of a dense checkpoint, and its dequantized twin.

  mlx_quantize.py --src DENSE_DIR --out QUANT_DIR --dense-out DEQUANT_DIR \
      [--bits 4] [--group-size 64] [--scales-dtype float32|bfloat16|float16] \
      [--override MODULE=GROUP:BITS | MODULE=false ...]

QUANT_DIR is what mlx-lm's convert writes: every Linear / Embedding weight (2-D, name ending in
".weight", not a norm) whose input dim is a multiple of its group size becomes the triple
  NAME.weight  U32[out, in*bits/32]  codes, one LSB-first bit stream per row
  NAME.scales  [out, in/group]       in --scales-dtype
  NAME.biases  [out, in/group]
with config.json "quantization" (and the same as "quantization_config"): {"group_size", "bits",
"mode": "affine", MODULE: {"group_size", "bits"} | false}. Other tensors are copied unchanged.
DEQUANT_DIR is the dense checkpoint whose quantized weights are replaced by exactly
dequant = scales*q + biases in float32 (product rounded, then the sum), everything else unchanged:
the model that transformers runs as the oracle for ringlm's quantized forward.

The quantizer is MLX's affine algorithm in float32 (round half to even, true group max, as MLX's
CPU backend). Needs only numpy (Debian python3-numpy).
"""
import argparse
import json
import os
import shutil
import struct

import numpy as np

ST_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "U32": np.uint32,
             "I32": np.int32}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", None)
    tensors = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        arr = np.frombuffer(data[b:e], dtype=ST_DTYPES[info["dtype"]]).reshape(info["shape"])
        tensors[name] = (info["dtype"], arr)
    return tensors, meta


def write_safetensors(path, tensors, meta=None):
    """tensors: name -> (safetensors dtype, numpy array)."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        dtype, arr = tensors[name]
        raw = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if meta:
        header["__metadata__"] = meta
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x):
    """Round to nearest even (as torch and MLX); NaN stays NaN."""
    bits = x.astype(np.float32).view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    rounded[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)
    return rounded


def to_f32(dtype, arr):
    if dtype == "BF16":
        return bf16_to_f32(arr)
    return arr.astype(np.float32)


def quantize(w, bits, group):
    """MLX affine quantization of w [N, K] f32 -> codes [N, K] u32, scales, biases [N, K/group]."""
    f = np.float32
    n, k = w.shape
    g = w.reshape(n, k // group, group).astype(f)
    w_min, w_max = g.min(axis=2), g.max(axis=2)
    n_bins = f(2**bits - 1)
    scale = np.maximum((w_max - w_min) / n_bins, f(1e-7)).astype(f)
    use_min = np.abs(w_min) > np.abs(w_max)
    scale = np.where(use_min, scale, -scale).astype(f)
    edge = np.where(use_min, w_min, w_max).astype(f)
    q0 = np.rint(edge / scale).astype(f)
    nonzero = q0 != 0
    scale = np.where(nonzero, edge / np.where(nonzero, q0, f(1)), scale).astype(f)
    bias = np.where(nonzero, edge, f(0)).astype(f)
    q = np.clip(np.rint((g - bias[..., None]) / scale[..., None]), f(0), n_bins)
    return q.reshape(n, k).astype(np.uint32), scale, bias


def pack(codes, bits):
    """codes [N, K] -> U32[N, K*bits/32]: code i at bits [i*bits, (i+1)*bits) of the row stream."""
    n, k = codes.shape
    stream = (codes[..., None] >> np.arange(bits, dtype=np.uint32)) & 1  # [N, K, bits]
    words = stream.reshape(n, k * bits // 32, 32).astype(np.uint64)
    return (words << np.arange(32, dtype=np.uint64)).sum(axis=2).astype(np.uint32)


def store_scales(x, dtype):
    """x f32 -> (safetensors dtype, stored array, the stored values widened back to f32)."""
    if dtype == "bfloat16":
        raw = f32_to_bf16(x)
        return "BF16", raw, bf16_to_f32(raw)
    if dtype == "float16":
        raw = x.astype(np.float16)
        return "F16", raw, raw.astype(np.float32)
    return "F32", x.astype(np.float32), x.astype(np.float32)


def parse_override(text):
    module, _, value = text.partition("=")
    if value == "false":
        return module, False
    group, _, bits = value.partition(":")
    return module, {"group_size": int(group), "bits": int(bits)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dense-out", required=True)
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--group-size", type=int, default=64)
    ap.add_argument("--scales-dtype", default="float32",
                    choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--override", action="append", default=[])
    args = ap.parse_args()

    overrides = dict(parse_override(o) for o in args.override)
    tensors, meta = read_safetensors(os.path.join(args.src, "model.safetensors"))
    quantized, dense = {}, {}
    for name, (dtype, arr) in tensors.items():
        module = name[: -len(".weight")] if name.endswith(".weight") else None
        spec = overrides.get(module, {"group_size": args.group_size, "bits": args.bits})
        linear = module is not None and arr.ndim == 2 and "norm" not in name
        if not linear or spec is False or arr.shape[1] % spec["group_size"] != 0:
            quantized[name] = dense[name] = (dtype, arr)
            continue
        w = to_f32(dtype, arr)
        codes, scales, biases = quantize(w, spec["bits"], spec["group_size"])
        sdt, s_raw, s = store_scales(scales, args.scales_dtype)
        _, b_raw, b = store_scales(biases, args.scales_dtype)
        quantized[name] = ("U32", pack(codes, spec["bits"]))
        quantized[module + ".scales"] = (sdt, s_raw)
        quantized[module + ".biases"] = (sdt, b_raw)
        group = spec["group_size"]
        n, k = w.shape
        deq = (s[..., None] * codes.reshape(n, k // group, group).astype(np.float32)).astype(
            np.float32) + b[..., None]
        dense[name] = ("F32", deq.astype(np.float32).reshape(n, k))

    with open(os.path.join(args.src, "config.json")) as f:
        config = json.load(f)
    qconfig = {"group_size": args.group_size, "bits": args.bits, "mode": "affine"}
    qconfig.update(overrides)
    for out, weights, cfg in ((args.out, quantized, dict(config, quantization=qconfig,
                                                         quantization_config=qconfig)),
                              (args.dense_out, dense, config)):
        os.makedirs(out, exist_ok=True)
        write_safetensors(os.path.join(out, "model.safetensors"), weights, meta)
        with open(os.path.join(out, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2, sort_keys=True)
            f.write("\n")
        extra = os.path.join(args.src, "generation_config.json")
        if os.path.exists(extra):
            shutil.copy(extra, out)
        n_q = sum(1 for k in weights if k.endswith(".scales"))
        print(f"{out}: {len(weights)} tensors, {n_q} quantized, "
              f"{os.path.getsize(os.path.join(out, 'model.safetensors'))} bytes")


if __name__ == "__main__":
    main()

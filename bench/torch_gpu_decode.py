#!/usr/bin/env python3
"""Reference decode speed on the GPU machine: transformers' generate on the same model shape.

Runs next to `ringlm bench --device cuda` in bench/gpu_decode.sh. The model is built from the
checkpoint's config.json with random bf16 weights on the GPU (decode speed does not depend on
the values, and random init is faster than reading 16 GB). For each batch size: greedy generate
with a fixed StaticCache and torch.compile (transformers' "static" cache implementation), prompt
of --prompt-len random tokens; decode tok/s = batch * (gen - 1) / (time(gen) - time(1 token)).
Every batch size is compiled and warmed up before any is timed (--start-after FILE: the timing
waits for FILE, so the caller can overlap the compile with its own CPU-heavy work, e.g. a build,
without that work disturbing the measurement). Prints one JSON line per measurement.
"""
import argparse
import json
import os
import time

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM


def timed_generate(model, ids, new_tokens, compiled):
    kwargs = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                  pad_token_id=0)
    if compiled:
        kwargs["cache_implementation"] = "static"
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    model.generate(ids, **kwargs)
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="checkpoint dir (only config.json is read)")
    ap.add_argument("--batch", default="1,8,32")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--mode", choices=["compiled", "eager"], default="compiled")
    ap.add_argument("--start-after", help="compile and warm up, then time only once this file "
                    "exists")
    args = ap.parse_args()

    torch.manual_seed(0)
    config = AutoConfig.from_pretrained(args.model)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16)
    model.eval()
    model.generation_config.eos_token_id = None  # random weights: never stop early
    compiled = args.mode == "compiled"
    batches = [int(b) for b in args.batch.split(",")]
    inputs = {b: torch.randint(0, config.vocab_size, (b, args.prompt_len), device="cuda")
              for b in batches}
    with torch.inference_mode():
        # Warm-up: compiles (static shapes per batch size) and fills the caches, for every batch
        # size before any timing.
        for batch in batches:
            timed_generate(model, inputs[batch], args.gen, compiled)
            timed_generate(model, inputs[batch], 1, compiled)
    if args.start_after:
        # The caller's own CPU-heavy work (a build) must not share the machine with the timing.
        while not os.path.exists(args.start_after):
            time.sleep(1)
    for batch in batches:
        with torch.inference_mode():
            full = min(timed_generate(model, inputs[batch], args.gen, compiled) for _ in range(2))
            first = min(timed_generate(model, inputs[batch], 1, compiled) for _ in range(2))
        tok_s = batch * (args.gen - 1) / max(full - first, 1e-9)
        print(json.dumps({"engine": "transformers", "mode": args.mode, "batch": batch,
                          "prompt_len": args.prompt_len, "gen": args.gen,
                          "decode_tok_s": tok_s, "torch": torch.__version__,
                          "transformers": transformers.__version__}), flush=True)

if __name__ == "__main__":
    main()

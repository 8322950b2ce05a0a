#!/usr/bin/env python3
"""Reference decode speed: the same Llama-family checkpoint's forward in plain PyTorch on CPU.

Used by bench/cpu_decode.sh next to `ringlm bench` in the same run (Debian's python3-torch; the
transformers library is not packaged by Debian, so the forward is written out here: embedding,
RMSNorm, rotary (default rope), GQA attention with a KV cache, SiLU MLP, LM head).
Prints one JSON line: {"decode_tok_s": ..., "prefill_tok_s": ..., "dtype": ..., "threads": ...}.
"""
import argparse
import json
import struct
import time

import numpy as np
import torch


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        raw = np.asarray(data[b:e])
        if info["dtype"] == "BF16":
            t = torch.from_numpy(raw.view(np.int16).copy()).view(torch.bfloat16)
        elif info["dtype"] == "F16":
            t = torch.from_numpy(raw.view(np.float16).copy())
        else:
            t = torch.from_numpy(raw.view(np.float32).copy())
        out[name] = t.reshape(info["shape"])
    return out


class Llama:
    def __init__(self, cfg, w, dtype):
        self.cfg, self.dtype = cfg, dtype
        self.w = {k: v.to(dtype) for k, v in w.items()}
        if "lm_head.weight" not in self.w:
            self.w["lm_head.weight"] = self.w["model.embed_tokens.weight"]
        self.heads = cfg["num_attention_heads"]
        self.kv_heads = cfg.get("num_key_value_heads", self.heads)
        self.head_dim = cfg.get("head_dim") or cfg["hidden_size"] // self.heads
        theta = cfg.get("rope_theta", 10000.0)
        d = self.head_dim
        self.inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2).float() / d))
        self.eps = cfg.get("rms_norm_eps", 1e-6)

    def norm(self, x, w):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (w.float() * xf).to(self.dtype)

    def rope(self, x, pos):
        freqs = pos.float()[:, None] * self.inv_freq[None]
        emb = torch.cat([freqs, freqs], -1)
        cos, sin = emb.cos().to(self.dtype), emb.sin().to(self.dtype)
        half = x.shape[-1] // 2
        rot = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * cos[None, :, None] + rot * sin[None, :, None]

    def forward(self, ids, start, cache):
        w, T = self.w, ids.shape[1]
        x = w["model.embed_tokens.weight"][ids]
        pos = torch.arange(start, start + T)
        for l in range(self.cfg["num_hidden_layers"]):
            p = f"model.layers.{l}."
            h = self.norm(x, w[p + "input_layernorm.weight"])
            q = (h @ w[p + "self_attn.q_proj.weight"].T).view(1, T, self.heads, self.head_dim)
            k = (h @ w[p + "self_attn.k_proj.weight"].T).view(1, T, self.kv_heads, self.head_dim)
            v = (h @ w[p + "self_attn.v_proj.weight"].T).view(1, T, self.kv_heads, self.head_dim)
            q, k = self.rope(q, pos), self.rope(k, pos)
            if l in cache:
                k = torch.cat([cache[l][0], k], 1)
                v = torch.cat([cache[l][1], v], 1)
            cache[l] = (k, v)
            rep = self.heads // self.kv_heads
            kk = k.repeat_interleave(rep, 2).transpose(1, 2)
            vv = v.repeat_interleave(rep, 2).transpose(1, 2)
            qq = q.transpose(1, 2)
            scores = (qq @ kk.transpose(-1, -2)) * (self.head_dim ** -0.5)
            if T > 1:  # causal within the new tokens (the cache holds only earlier positions)
                S = kk.shape[2]
                mask = torch.ones(T, S, dtype=torch.bool).tril(S - T)
                scores = scores.masked_fill(~mask, float("-inf"))
            att = torch.softmax(scores.float(), -1).to(self.dtype) @ vv
            o = att.transpose(1, 2).reshape(1, T, -1) @ w[p + "self_attn.o_proj.weight"].T
            x = x + o
            h = self.norm(x, w[p + "post_attention_layernorm.weight"])
            g = h @ w[p + "mlp.gate_proj.weight"].T
            u = h @ w[p + "mlp.up_proj.weight"].T
            x = x + (torch.nn.functional.silu(g) * u) @ w[p + "mlp.down_proj.weight"].T
        x = self.norm(x[:, -1:], w["model.norm.weight"])
        return x @ w["lm_head.weight"].T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = json.load(open(args.model + "/config.json"))
    model = Llama(cfg, load_safetensors(args.model + "/model.safetensors"), getattr(torch, args.dtype))
    gen = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, cfg["vocab_size"], (1, args.prompt_len), generator=gen)
    best_prefill = best_decode = 0.0
    with torch.inference_mode():
        for r in range(args.repeat + 1):  # the first run is a warm-up
            cache = {}
            t0 = time.perf_counter()
            logits = model.forward(prompt, 0, cache)
            t1 = time.perf_counter()
            tok = logits[0, -1].argmax().view(1, 1)
            for i in range(args.gen - 1):
                logits = model.forward(tok, args.prompt_len + i, cache)
                tok = logits[0, -1].argmax().view(1, 1)
            t2 = time.perf_counter()
            if r > 0:
                best_prefill = max(best_prefill, args.prompt_len / (t1 - t0))
                best_decode = max(best_decode, (args.gen - 1) / (t2 - t1))
    print(json.dumps({"impl": "pytorch", "torch": torch.__version__, "dtype": args.dtype,
                      "threads": torch.get_num_threads(), "prefill_tok_s": best_prefill,
                      "decode_tok_s": best_decode}))


if __name__ == "__main__":
    main()

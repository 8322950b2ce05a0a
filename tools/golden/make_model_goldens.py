#!/usr/bin/env python3
"""Makes tiny random models and their transformers goldens (run on the GPU machine).

For each architecture: a random fp32 checkpoint (config.json, generation_config.json,
model.safetensors) under OUT/models/NAME and OUT/goldens/NAME.safetensors with
  prompt_ids  I32[P]        the prompt (P >= 64)
  logits      F32[P, V]     logits at every prompt position (eager attention, fp32, CPU)
  greedy_ids  I32[G]        G-token greedy continuation, full recompute each step (no cache)
  inv_freq    F32[D/2]      the rotary table transformers used (for debugging rope variants)
Usage: make_model_goldens.py --out DIR [--only NAME ...]
Requires torch and transformers (5.x); deterministic (fixed seeds, CPU).
"""
import argparse
import json
import os

import torch
import transformers
from safetensors.torch import save_file

VOCAB = 512
PROMPT = 80
GREEDY = 32


def rope(theta, **extra):
    out = {"rope_type": extra.pop("rope_type", "default"), "rope_theta": theta}
    out.update(extra)
    return out


# name -> (config class name, kwargs). Shapes are tiny but exercise GQA, odd head_dim, biases.
SPECS = {
    "llama3": ("LlamaConfig", dict(
        hidden_size=64, intermediate_size=160, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, tie_word_embeddings=False,
        max_position_embeddings=1024,
        rope_parameters=rope(500000.0, rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                             high_freq_factor=4.0, original_max_position_embeddings=64))),
    "llama_yarn": ("LlamaConfig", dict(
        hidden_size=96, intermediate_size=128, num_hidden_layers=2, num_attention_heads=6,
        num_key_value_heads=2, head_dim=16, tie_word_embeddings=True,
        max_position_embeddings=512,
        rope_parameters=rope(10000.0, rope_type="yarn", factor=4.0,
                             original_max_position_embeddings=64))),
    "llama_linear": ("LlamaConfig", dict(
        hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, head_dim=32, tie_word_embeddings=False, mlp_bias=False,
        max_position_embeddings=512, rope_parameters=rope(10000.0, rope_type="linear", factor=2.0))),
    "mistral": ("MistralConfig", dict(
        hidden_size=80, intermediate_size=144, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=1, head_dim=24, tie_word_embeddings=False, sliding_window=None,
        max_position_embeddings=1024, rope_parameters=rope(1000000.0))),
    "qwen2": ("Qwen2Config", dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, tie_word_embeddings=True, use_sliding_window=False,
        max_position_embeddings=1024, rope_parameters=rope(1000000.0))),
    "qwen3": ("Qwen3Config", dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=32, tie_word_embeddings=True, use_sliding_window=False,
        max_position_embeddings=1024, rope_parameters=rope(1000000.0))),
}


def build_config(class_name, kwargs):
    cls = getattr(transformers, class_name)
    common = dict(vocab_size=VOCAB, rms_norm_eps=1e-5, initializer_range=0.08,
                  bos_token_id=1, eos_token_id=2, pad_token_id=None)
    try:
        cfg = cls(**common, **kwargs)
    except TypeError:  # transformers 4 spelling
        kw = dict(kwargs)
        rp = kw.pop("rope_parameters")
        kw["rope_theta"] = rp.pop("rope_theta")
        if rp.get("rope_type", "default") != "default":
            kw["rope_scaling"] = rp
        cfg = cls(**common, **kw)
    cfg._attn_implementation = "eager"
    return cfg


def randomize(model, seed):
    """Random weights everywhere, norms included (ones would hide weight-loading bugs)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            else:
                fan_in = p.shape[-1]
                p.copy_(torch.randn(p.shape, generator=gen) * (1.5 / fan_in ** 0.5))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    torch.manual_seed(0)
    for index, (name, (cls, kwargs)) in enumerate(SPECS.items()):
        if args.only and name not in args.only:
            continue
        cfg = build_config(cls, kwargs)
        model = transformers.AutoModelForCausalLM.from_config(cfg).float().eval()
        randomize(model, 1000 + index)
        model_dir = os.path.join(args.out, "models", name)
        model.save_pretrained(model_dir, safe_serialization=True)
        gen = torch.Generator().manual_seed(2000 + index)
        prompt = torch.randint(3, VOCAB, (PROMPT,), generator=gen)
        with torch.no_grad():
            logits = model(prompt[None]).logits[0].float()
            ids = prompt.clone()
            greedy = []
            greedy_gap = float("inf")
            for _ in range(GREEDY):
                last = model(ids[None]).logits[0, -1]
                nxt = int(last.argmax())
                top = last.topk(2).values
                greedy_gap = min(greedy_gap, float(top[0] - top[1]))
                greedy.append(nxt)
                ids = torch.cat([ids, torch.tensor([nxt])])
        rotary = model.model.rotary_emb
        tensors = {
            "prompt_ids": prompt.to(torch.int32).contiguous(),
            "logits": logits.contiguous(),
            "greedy_ids": torch.tensor(greedy, dtype=torch.int32),
            "inv_freq": rotary.inv_freq.float().contiguous(),
            "attention_scaling": torch.tensor([float(rotary.attention_scaling)]),
        }
        os.makedirs(os.path.join(args.out, "goldens"), exist_ok=True)
        save_file(tensors, os.path.join(args.out, "goldens", name + ".safetensors"),
                  metadata={"transformers": transformers.__version__, "torch": torch.__version__})
        top2 = logits.topk(2, dim=-1).values
        print(f"{name}: params={sum(p.numel() for p in model.parameters())} "
              f"max|logit|={logits.abs().max():.3f} min top1-top2 gap={float((top2[:,0]-top2[:,1]).min()):.2e} "
              f"greedy gap={greedy_gap:.2e} greedy={greedy[:8]}...")
    with open(os.path.join(args.out, "versions.json"), "w") as f:
        json.dump({"transformers": transformers.__version__, "torch": torch.__version__}, f)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Makes tiny random models and their transformers goldens (run on the GPU machine).

For each architecture: a random fp32 checkpoint (config.json, generation_config.json,
model.safetensors) under OUT/models/NAME and OUT/goldens/NAME.safetensors with
  prompt_ids  I32[P]        the prompt (P >= 64)
  logits      F32[P, V]     logits at every prompt position (eager attention, fp32, CPU)
  greedy_ids  I32[G]        G-token greedy continuation, full recompute each step (no cache)
  inv_freq    F32[D/2]      the rotary table transformers used (for debugging rope variants)
Usage: make_model_goldens.py --out DIR [--only NAME ...]
       make_model_goldens.py --out DIR --existing NAME=MODEL_DIR[:GREEDY] ...
--existing makes goldens for checkpoints that are already written (the dequantized twins of the
MLX-quantized fixtures, tests/fixtures/models/*_mlx_dense, from tools/quant/mlx_quantize.py):
OUT/goldens/NAME.safetensors only, the checkpoint itself is not rewritten.
Requires torch and transformers (5.x); deterministic (fixed seeds, CPU).
"""
import argparse
import json
import os
import zlib

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
    # Sliding-window families: prompts (80) are 5x the window (16); 64-token continuations.
    "mistral_sw": ("MistralConfig", dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, tie_word_embeddings=False, sliding_window=16,
        max_position_embeddings=1024, rope_parameters=rope(10000.0)), 64),
    "gemma2": ("Gemma2Config", dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=24, sliding_window=16,
        attn_logit_softcapping=50.0, final_logit_softcapping=30.0, tie_word_embeddings=False,
        hidden_activation="gelu_pytorch_tanh", max_position_embeddings=1024,
        rope_parameters=rope(10000.0)), 64),
    "gemma3": ("Gemma3TextConfig", dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=6, num_attention_heads=4,
        num_key_value_heads=2, head_dim=32, query_pre_attn_scalar=32, sliding_window=16,
        tie_word_embeddings=False,  # a tied random head keeps predicting the input token
        layer_types=["sliding_attention", "sliding_attention", "full_attention",
                     "sliding_attention", "sliding_attention", "full_attention"],
        hidden_activation="gelu_pytorch_tanh", max_position_embeddings=1024,
        rope_parameters={"full_attention": rope(1000000.0, rope_type="linear", factor=8.0),
                         "sliding_attention": rope(10000.0)}), 64),
    "qwen3": ("Qwen3Config", dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=32, tie_word_embeddings=True, use_sliding_window=False,
        max_position_embeddings=1024, rope_parameters=rope(1000000.0))),
}


def build_config(class_name, kwargs):
    kwargs = dict(kwargs)
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


def randomize(model, seed, gemma=False):
    """Random weights everywhere, norms included (ones would hide weight-loading bugs).
    Gemma norms scale by (1 + w), so theirs are centred on 0."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name:
                p.copy_((0.0 if gemma else 1.0) + 0.2 * torch.randn(p.shape, generator=gen))
            elif gemma and "embed_tokens" in name:
                # Gemma multiplies embeddings by sqrt(hidden): a smaller spread keeps the tied LM
                # head from predicting the input token again and again.
                p.copy_(torch.randn(p.shape, generator=gen) * (0.4 / p.shape[-1] ** 0.5))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            else:
                fan_in = p.shape[-1]
                p.copy_(torch.randn(p.shape, generator=gen) * (1.5 / fan_in ** 0.5))


def write_goldens(model, name, out, greedy_len):
    """OUT/goldens/NAME.safetensors for `model` (fp32, eager attention), prompt seeded by NAME."""
    gen = torch.Generator().manual_seed(zlib.crc32(name.encode()) + 1)
    prompt = torch.randint(3, VOCAB, (PROMPT,), generator=gen)
    with torch.no_grad():
        logits = model(prompt[None]).logits[0].float()
        ids = prompt.clone()
        greedy = []
        greedy_gap = float("inf")
        for _ in range(greedy_len):
            last = model(ids[None]).logits[0, -1]
            nxt = int(last.argmax())
            top = last.topk(2).values
            greedy_gap = min(greedy_gap, float(top[0] - top[1]))
            greedy.append(nxt)
            ids = torch.cat([ids, torch.tensor([nxt])])
    tensors = {
        "prompt_ids": prompt.to(torch.int32).contiguous(),
        "logits": logits.contiguous(),
        "greedy_ids": torch.tensor(greedy, dtype=torch.int32),
    }
    # The rotary tables transformers used (one per layer type for gemma3), for debugging.
    for bname, buf in model.model.rotary_emb.named_buffers():
        if "inv_freq" in bname and "original" not in bname:
            tensors[bname.replace(".", "_")] = buf.float().contiguous()
    os.makedirs(os.path.join(out, "goldens"), exist_ok=True)
    save_file(tensors, os.path.join(out, "goldens", name + ".safetensors"),
              metadata={"transformers": transformers.__version__, "torch": torch.__version__})
    top2 = logits.topk(2, dim=-1).values
    print(f"{name}: params={sum(p.numel() for p in model.parameters())} "
          f"max|logit|={logits.abs().max():.3f} min top1-top2 gap={float((top2[:,0]-top2[:,1]).min()):.2e} "
          f"greedy gap={greedy_gap:.2e} greedy={greedy[:8]}...")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--existing", nargs="*", default=[], metavar="NAME=MODEL_DIR[:GREEDY]")
    args = ap.parse_args()
    torch.manual_seed(0)
    for item in args.existing:
        name, _, where = item.partition("=")
        model_dir, _, greedy = where.partition(":")
        model = transformers.AutoModelForCausalLM.from_pretrained(
            model_dir, dtype=torch.float32, attn_implementation="eager").float().eval()
        write_goldens(model, name, args.out, int(greedy) if greedy else GREEDY)
    if args.existing:
        with open(os.path.join(args.out, "versions.json"), "w") as f:
            json.dump({"transformers": transformers.__version__, "torch": torch.__version__}, f)
        return
    for name, spec in SPECS.items():
        if args.only and name not in args.only:
            continue
        cls, kwargs = spec[0], spec[1]
        greedy_len = spec[2] if len(spec) > 2 else GREEDY
        cfg = build_config(cls, kwargs)
        model = transformers.AutoModelForCausalLM.from_config(cfg).float().eval()
        randomize(model, zlib.crc32(name.encode()), gemma=cfg.model_type.startswith("gemma"))
        model_dir = os.path.join(args.out, "models", name)
        model.save_pretrained(model_dir, safe_serialization=True)
        write_goldens(model, name, args.out, greedy_len)
    with open(os.path.join(args.out, "versions.json"), "w") as f:
        json.dump({"transformers": transformers.__version__, "torch": torch.__version__}, f)


if __name__ == "__main__":
    main()

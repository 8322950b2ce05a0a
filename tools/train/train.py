#!/usr/bin/env python3
"""Trains ringlm's default models from the public-domain corpus of prep_data.py (run on the GPU
machine: torch, transformers 5, tokenizers).

  python3 tools/train/train.py --data .carry/train-data --out $OUT/models [--smoke]

Writes into --out:
  tokenizer/                      tokenizer.json + tokenizer_config.json (byte-level BPE, 4096)
  ringlm-kjv-llama/               Llama, ~14M parameters, bf16        } config.json,
  ringlm-kjv-gemma3/              Gemma 3 text, sliding window 64, bf16 } generation_config.json,
  ringlm-kjv-draft/               Llama, ~1M parameters, f32 (draft)  } safetensors, tokenizer
  goldens/NAME.safetensors        transformers goldens for tests/fixtures/goldens
  train_log.json                  data files + sha256, tokens, steps, lr, held-out loss, times
  README.md                       the models/README.md to ship (provenance, licence, perplexity)
--smoke: a dozen steps per model and short goldens (pipeline check, < 1 minute; not for shipping).
Fixed seeds; the number of steps is fixed per model after timing its first steps, so the whole
run fits in ~6 minutes on one H200 (see tools/train/README.md).
"""
import argparse
import json
import math
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import export  # noqa: E402
import hf_tokenizer  # noqa: E402
import lm_data  # noqa: E402
import readme  # noqa: E402
import specs  # noqa: E402
import trainer  # noqa: E402

LINES = []


def log(msg):
    line = f"[{time.time() - START:6.1f}s] {msg}"
    LINES.append(line)
    print(line, flush=True)


START = time.time()


def check_chat_rendering(render, corpus):
    """The training data is rendered by specs.render_chat; the shipped template must agree."""
    cases = corpus.chat_train[:200] + [[{"role": "system", "content": "Be brief."},
                                        {"role": "user", "content": "Define cynic."}]]
    for messages in cases:
        for gen in (False, True):
            a, b = render(messages, gen), specs.render_chat(messages, gen)
            if a != b:
                raise SystemExit(f"chat template renders {a!r}, training data has {b!r}")


def perplexity(loss):
    return math.exp(loss) if loss < 700 else float("inf")


def train_one(name, spec, ctx):
    args, device, tok, render, stream, held_text, held_chat, held_docs = ctx
    log(f"{name}: building")
    model = export.build_model(spec, specs.SEED, device)
    params = export.parameter_count(model)
    batch = 4 if args.local_check else spec["batch"]
    tokens_per_step = batch * specs.CONTEXT
    max_steps = math.ceil(spec["epochs"] * len(stream) / tokens_per_step)
    budget = spec["budget_s"]
    timing = (5, 25)
    if args.smoke:
        max_steps, budget, timing = specs.SMOKE["max_steps"], specs.SMOKE["budget_s"], (2, 6)
    cfg = trainer.TrainConfig(lr=spec["lr"], batch=batch, context=specs.CONTEXT,
                              max_steps=max_steps, budget_s=budget,
                              warmup_steps=min(specs.WARMUP_STEPS, max_steps // 4 + 1),
                              min_lr_fraction=specs.MIN_LR_FRACTION,
                              weight_decay=specs.WEIGHT_DECAY, seed=specs.SEED,
                              timing_steps=timing)
    log(f"{name}: {params:,} parameters, up to {max_steps} steps of {tokens_per_step} tokens")
    run = trainer.train(model, stream, cfg, device, heldout=held_text, log=log)
    directory = os.path.join(args.out, name)
    files = export.save_checkpoint(model, directory, spec["save_dtype"],
                                   os.path.join(args.out, "tokenizer"))
    del model
    if device.type == "cuda":
        torch.cuda.empty_cache()
    ref = export.reload_f32(directory, device)
    text_loss = trainer.heldout_loss(ref, held_text, device, amp=False)
    chat_loss = trainer.heldout_loss(ref, held_chat, device, amp=False)
    log(f"{name}: saved weights, held-out text loss {text_loss:.4f} (ppl {perplexity(text_loss):.2f})"
        f", chat loss {chat_loss:.4f}")
    samples = export.samples(ref, tok, render, device, max_new=8 if args.smoke else 40)
    ref = ref.to("cpu")
    golden_spec = dict(spec["golden"], chat_questions=len(specs.GOLDEN_CHATS),
                       chat_tokens=specs.GOLDEN_CHAT_TOKENS)
    if args.smoke:
        golden_spec.update(greedy=specs.SMOKE["golden_greedy"], chat_questions=1,
                           chat_tokens=specs.SMOKE["golden_greedy"])
    # Golden prompts: the starts of held-out KJV chapters (text the model never saw).
    candidates = [ids[:golden_spec["prompt"]] for ids in held_docs
                  if len(ids) >= golden_spec["prompt"]][:1 if args.smoke else 3]
    import transformers
    golden = export.make_golden(
        ref, tok, render, candidates, golden_spec,
        os.path.join(args.out, "goldens", name + ".safetensors"),
        {"model": name, "transformers": transformers.__version__, "torch": torch.__version__})
    log(f"{name}: golden prompt {golden['prompt_tokens']} greedy {golden['greedy_tokens']} "
        f"min gap {golden['greedy_min_gap']:.3g}; chat {golden['chat_user']!r} -> "
        f"{golden['chat_answer']!r} (min gap {golden['chat_greedy_min_gap']:.3g})")
    del ref
    return {
        "config_class": spec["config_class"], "config": spec["params"], "parameters": params,
        "save_dtype": spec["save_dtype"], "lr": spec["lr"], "batch": batch,
        "context": specs.CONTEXT, "warmup_steps": cfg.warmup_steps, "max_steps": max_steps,
        "budget_s": budget, "weight_decay": specs.WEIGHT_DECAY, "betas": [0.9, 0.95],
        "epochs_done": run["tokens"] / len(stream), **run,
        "heldout_text_loss": text_loss, "heldout_text_ppl": perplexity(text_loss),
        "heldout_chat_loss": chat_loss, "heldout_chat_ppl": perplexity(chat_loss),
        "files": [{"name": f, "bytes": b} for f, b in files], "samples": samples, "golden": golden,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="prep_data.py's output folder")
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true", help="a few steps of everything")
    ap.add_argument("--only", nargs="*", help="train only these models (names in specs.py)")
    ap.add_argument("--local-check", action="store_true",
                    help="batches of 4 and 4 held-out windows: the CPU dry run (dryrun/README.md)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(specs.SEED)
    np.random.seed(specs.SEED)
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 evaluation and goldens stay float32
    torch.backends.cudnn.allow_tf32 = False
    torch.set_num_threads(min(16, os.cpu_count() or 1))
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    log(f"device {device}" + (f" ({torch.cuda.get_device_name()})" if device.type == "cuda" else ""))

    corpus = lm_data.Corpus(args.data)
    max_bytes = specs.SMOKE["tokenizer_bytes"] if args.smoke else None
    tok = hf_tokenizer.train_tokenizer(corpus.tokenizer_texts(max_bytes))
    tok_dir = os.path.join(args.out, "tokenizer")
    hf_tokenizer.save_tokenizer(tok, tok_dir)
    log(f"tokenizer: {tok.get_vocab_size()} tokens")
    render = hf_tokenizer.transformers_chat_renderer(tok_dir, log)
    renderer = "transformers apply_chat_template"
    if render is None:
        render, renderer = (lambda m, g: specs.render_chat(m, g)), "specs.render_chat (fallback)"
    check_chat_rendering(render, corpus)

    def encode(docs):
        return hf_tokenizer.encode_batch(tok, docs)
    stream = lm_data.token_stream(corpus.train_docs(), encode, specs.SEED)
    held_docs = encode(corpus.heldout_text_docs())
    held_text = lm_data.heldout_windows(
        np.concatenate([np.asarray(i, np.int32) for i in held_docs]), specs.CONTEXT + 1)
    held_chat = lm_data.heldout_windows(
        np.concatenate([np.asarray(i, np.int32) for i in encode(corpus.heldout_chat_docs())]),
        specs.CONTEXT + 1)
    if args.local_check:
        held_text, held_chat = held_text[:4], held_chat[:4]
    counts = {"train_tokens": int(len(stream)),
              "heldout_text_tokens": int((held_text >= 0).sum()),
              "heldout_chat_tokens": int((held_chat >= 0).sum()),
              "train_documents": len(corpus.train_docs())}
    log(f"data: {counts}")

    import tokenizers
    import transformers
    record = {
        "complete": False, "smoke": args.smoke, "device": str(device),
        "device_name": torch.cuda.get_device_name() if device.type == "cuda" else platform.processor(),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "tokenizers": tokenizers.__version__, "python": platform.python_version()},
        "seed": specs.SEED, "data_dir": args.data, "data_files": lm_data.describe_files(args.data),
        "manifest": json.load(open(os.path.join(args.data, "manifest.json"))),
        "tokenizer": {"vocab_size": tok.get_vocab_size(), "special_tokens": specs.SPECIAL_TOKENS,
                      "trained_on_bytes": max_bytes or "all training text",
                      "chat_template_reference": renderer},
        "tokens": counts, "models": {}, "draft_llama_greedy_agreement": None,
    }
    ctx = (args, device, tok, render, stream, held_text, held_chat, held_docs)
    for name, spec in specs.MODELS.items():
        if args.only and name not in args.only:
            continue
        record["models"][name] = train_one(name, spec, ctx)
        write_log(args.out, record)  # what is done survives a later failure

    models = record["models"]
    if "ringlm-kjv-llama" in models and "ringlm-kjv-draft" in models:
        target = export.reload_f32(os.path.join(args.out, "ringlm-kjv-llama"), device)
        draft = export.reload_f32(os.path.join(args.out, "ringlm-kjv-draft"), device)
        agreement = export.argmax_agreement(target, draft, held_text, device)
        record["draft_llama_greedy_agreement"] = agreement
        log(f"draft/llama greedy agreement on held-out text: {agreement:.3f}")
    record["complete"] = True
    write_log(args.out, record)
    readme.write(os.path.join(args.out, "README.md"), record)
    total = sum(fl["bytes"] for m in models.values() for fl in m["files"])
    log(f"done: {len(models)} models, {total / 2**20:.1f} MiB, {record['wall_seconds']:.0f}s")
    write_log(args.out, record)
    if total >= specs.MAX_TOTAL_BYTES:
        raise SystemExit(f"models total {total} bytes, over {specs.MAX_TOTAL_BYTES}")


def write_log(out, record):
    record["wall_seconds"] = time.time() - START
    with open(os.path.join(out, "train_log.json"), "w") as f:
        json.dump(record, f, indent=1)
    with open(os.path.join(out, "train_stdout.txt"), "w") as f:
        f.write("\n".join(LINES) + "\n")


if __name__ == "__main__":
    main()

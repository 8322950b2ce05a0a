"""Building, saving and checking the models of tools/train with transformers: the checkpoint
(safetensors shards under 16 MiB, config, generation_config, tokenizer files), the reload of the
saved weights in float32 (what ringlm computes with), and the transformers goldens that ringlm's
tests compare against (format of tests/fixtures/goldens, see tests/models/golden_util.h)."""
import glob
import inspect
import os
import shutil

import torch

import specs


def build_model(spec, seed, device):
    import transformers
    cls = getattr(transformers, spec["config_class"])
    config = cls(**spec["params"])
    config._attn_implementation = "sdpa"
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config)
    return model.float().to(device)


def parameter_count(model):
    """Distinct parameters (a tied LM head counts once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def save_checkpoint(model, directory, dtype, tokenizer_dir):
    """Writes the checkpoint in `dtype`; returns [(file, bytes)]. Raises if a file is too big."""
    from transformers import GenerationConfig
    model.to(getattr(torch, dtype))
    model.generation_config = GenerationConfig(bos_token_id=specs.BOS_ID, eos_token_id=specs.EOS_ID,
                                               pad_token_id=specs.PAD_ID)
    kwargs = {"max_shard_size": "15MB"}
    if "safe_serialization" in inspect.signature(model.save_pretrained).parameters:
        kwargs["safe_serialization"] = True
    model.save_pretrained(directory, **kwargs)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tokenizer_dir, name), os.path.join(directory, name))
    files = sorted((os.path.basename(p), os.path.getsize(p))
                   for p in glob.glob(os.path.join(directory, "*")))
    if not any(f.endswith(".safetensors") for f, _ in files):
        raise SystemExit(f"{directory}: save_pretrained wrote no safetensors: {files}")
    for name, size in files:
        if size >= specs.MAX_FILE_BYTES:
            raise SystemExit(f"{directory}/{name} is {size} bytes (limit {specs.MAX_FILE_BYTES})")
    return files


def reload_f32(directory, device):
    """The saved checkpoint in float32 with eager attention (transformers' plain reference)."""
    from transformers import AutoModelForCausalLM
    try:
        model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32,
                                                     attn_implementation="eager")
    except TypeError:  # transformers 4 spelling
        model = AutoModelForCausalLM.from_pretrained(directory, torch_dtype=torch.float32,
                                                     attn_implementation="eager")
    return model.float().to(device).eval()


@torch.no_grad()
def greedy(model, prompt, count, device, stop=()):
    """Greedy continuation recomputing the whole sequence each step (no cache, as the fixture
    goldens); returns (ids, smallest top-1 minus top-2 logit gap along the way)."""
    ids = torch.as_tensor(prompt, dtype=torch.long, device=device)
    out, gap = [], float("inf")
    for _ in range(count):
        last = model(input_ids=ids[None], use_cache=False).logits[0, -1].float()
        top = last.topk(2).values
        gap = min(gap, float(top[0] - top[1]))
        nxt = int(last.argmax())
        out.append(nxt)
        ids = torch.cat([ids, torch.tensor([nxt], device=device)])
        if nxt in stop:
            break
    return out, gap


@torch.no_grad()
def argmax_agreement(model_a, model_b, windows, device, batch=16):
    """Fraction of held-out positions where both models' greedy next token agree (how often a
    draft's token would be accepted by the target under greedy speculative decoding)."""
    same, count = 0, 0
    for start in range(0, len(windows), batch):
        chunk = torch.as_tensor(windows[start:start + batch], dtype=torch.long, device=device)
        valid = chunk >= 0
        inputs = chunk.clamp(min=0)
        a = model_a(input_ids=inputs, use_cache=False).logits.argmax(-1)
        b = model_b(input_ids=inputs, use_cache=False).logits.argmax(-1)
        same += int(((a == b) & valid).sum())
        count += int(valid.sum())
    return same / max(1, count)


TOKENIZER_TEXT = ("In the beginning God created the heaven and the earth.\n"
                  "ZEUS, n.  The chief of Grecian gods -- “naïve” café, 1611 A.D.!  Tabs\tand  spaces")


@torch.no_grad()
def make_golden(model, tok, render_chat, candidates, golden_spec, path, meta):
    """Writes the golden of `model` (float32 on the CPU) to `path`. `candidates`: prompt id lists;
    the one whose greedy continuation has the widest top-1/top-2 margin is kept (likewise for the
    chat question), so that float rounding differences between ringlm and transformers cannot flip
    a greedy token."""
    from safetensors.torch import save_file
    cpu = torch.device("cpu")
    best = None
    for prompt in candidates:
        ids, gap = greedy(model, prompt, golden_spec["greedy"], cpu)
        if best is None or gap > best[2]:
            best = (prompt, ids, gap)
    prompt, greedy_ids, gap = best
    logits = model(input_ids=torch.tensor([prompt]), use_cache=False).logits[0].float()
    chat = None
    for question in specs.GOLDEN_CHATS[:golden_spec["chat_questions"]]:
        text = render_chat([{"role": "user", "content": question}], True)
        ids = tok.encode(text, add_special_tokens=False).ids
        answer, chat_gap = greedy(model, ids, golden_spec["chat_tokens"], cpu,
                                  stop=(specs.EOS_ID,))
        if chat is None or chat_gap > chat[4]:
            chat = (question, text, ids, answer, chat_gap)
    question, chat_text, chat_ids, chat_greedy, chat_gap = chat
    tensors = {
        "prompt_ids": torch.tensor(prompt, dtype=torch.int32),
        "logits": logits.contiguous(),
        "greedy_ids": torch.tensor(greedy_ids, dtype=torch.int32),
        "chat_prompt_ids": torch.tensor(chat_ids, dtype=torch.int32),
        "chat_greedy_ids": torch.tensor(chat_greedy, dtype=torch.int32),
        "tokenizer_ids": torch.tensor(tok.encode(TOKENIZER_TEXT).ids, dtype=torch.int32),
    }
    metadata = dict(meta)
    metadata.update({
        "greedy_min_gap": f"{gap:.6g}", "chat_greedy_min_gap": f"{chat_gap:.6g}",
        "chat_user": question, "chat_prompt": chat_text,
        "chat_max_tokens": golden_spec["chat_tokens"],
        "chat_answer": tok.decode(chat_greedy, skip_special_tokens=True),
        "tokenizer_text": TOKENIZER_TEXT,
    })
    os.makedirs(os.path.dirname(path), exist_ok=True)
    save_file(tensors, path, metadata={k: str(v) for k, v in metadata.items()})
    return {"prompt_tokens": len(prompt), "greedy_tokens": len(greedy_ids),
            "greedy_min_gap": gap, "chat_greedy_min_gap": chat_gap,
            "chat_user": question, "chat_answer": metadata["chat_answer"],
            "bytes": os.path.getsize(path)}


def samples(model, tok, render_chat, device, max_new=40):
    """Greedy continuations of specs.TEXT_PROMPTS and answers to specs.CHAT_PROMPTS."""
    out = []
    for text in specs.TEXT_PROMPTS:
        ids, _ = greedy(model, tok.encode(text).ids, max_new, device, stop=(specs.EOS_ID,))
        out.append({"kind": "text", "prompt": text,
                    "output": tok.decode(ids, skip_special_tokens=True)})
    for question in specs.CHAT_PROMPTS:
        prompt = render_chat([{"role": "user", "content": question}], True)
        ids, _ = greedy(model, tok.encode(prompt, add_special_tokens=False).ids, max_new * 2,
                        device, stop=(specs.EOS_ID,))
        out.append({"kind": "chat", "prompt": question,
                    "output": tok.decode(ids, skip_special_tokens=True)})
    return out

"""The training loop of tools/train: AdamW, linear warm-up then cosine decay, bf16 autocast on CUDA,
random windows of a token stream drawn from a seeded generator, and a step count fixed after
measuring the step time so the loop fits its time budget. Needs torch only: anything whose
forward(input_ids=..., use_cache=False) returns an object with .logits can be trained."""
import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class TrainConfig:
    lr: float
    batch: int
    context: int
    max_steps: int          # upper bound (epochs of the stream)
    budget_s: float         # upper bound on the loop's wall time
    warmup_steps: int
    min_lr_fraction: float
    weight_decay: float
    seed: int
    timing_steps: tuple = (5, 25)  # steps between which the step time is measured
    evals: int = 4          # held-out evaluations along the way (for the log's curve)


def lr_at(step, total, cfg):
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = min(1.0, (step - cfg.warmup_steps) / max(1, total - cfg.warmup_steps))
    floor = cfg.lr * cfg.min_lr_fraction
    return floor + (cfg.lr - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def autocast(device):
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cpu", enabled=False)


def loss_of(model, tokens, device, amp=True):
    """Mean next-token cross-entropy of I64[B, T] windows; ids < 0 are padding (ignored).
    amp: bf16 autocast on CUDA (training); off computes in the weights' dtype."""
    inputs = tokens[:, :-1].clamp(min=0)
    targets = tokens[:, 1:]
    with autocast(device) if amp else torch.autocast(device.type, enabled=False):
        logits = model(input_ids=inputs, use_cache=False).logits
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1),
                           ignore_index=-1)


@torch.no_grad()
def heldout_loss(model, windows, device, batch=32, amp=True):
    """Mean cross-entropy over every predicted token of I32[W, T] windows (numpy)."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for start in range(0, len(windows), batch):
        chunk = torch.as_tensor(windows[start:start + batch], dtype=torch.long, device=device)
        n = int((chunk[:, 1:] >= 0).sum())
        total += float(loss_of(model, chunk, device, amp)) * n
        count += n
    model.train(was_training)
    return total / max(1, count)


def optimizer_for(model, cfg, device):
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    rest = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay},
              {"params": rest, "weight_decay": 0.0}]
    extra = {"fused": True} if device.type == "cuda" else {}
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.95), eps=1e-8, **extra)


def train(model, stream, cfg, device, heldout=None, log=print):
    """Trains `model` in place on I32[N] `stream` (numpy); returns the run's record."""
    gen = torch.Generator().manual_seed(cfg.seed)
    data = torch.as_tensor(stream, dtype=torch.long, device=device)
    span = cfg.context + 1
    offsets = torch.arange(span, device=device)
    opt = optimizer_for(model, cfg, device)
    model.train()
    total = cfg.max_steps
    curve, losses = [], []
    start = time.time()
    t_mark = None
    eval_every = None
    step = 0
    while step < total:
        if step == cfg.timing_steps[0]:
            sync(device)
            t_mark = time.time()
        if step == cfg.timing_steps[1] and t_mark is not None:
            sync(device)
            step_s = (time.time() - t_mark) / (cfg.timing_steps[1] - cfg.timing_steps[0])
            by_time = int(cfg.budget_s / step_s)
            total = max(step + 1, min(cfg.max_steps, by_time))
            log(f"  step time {step_s * 1e3:.1f} ms ({cfg.batch * cfg.context / step_s:,.0f} tok/s)"
                f": {total} steps (max {cfg.max_steps}, budget {cfg.budget_s:.0f}s)")
        if eval_every is None and step >= cfg.timing_steps[1]:
            eval_every = max(1, total // cfg.evals)
        for group in opt.param_groups:
            group["lr"] = lr_at(step, total, cfg)
        starts = torch.randint(0, len(stream) - span, (cfg.batch,), generator=gen).to(device)
        batch = data[starts[:, None] + offsets[None, :]]
        loss = loss_of(model, batch, device)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        if step % 50 == 0 or step == total:
            losses.append((step, float(loss)))
        if heldout is not None and eval_every and (step % eval_every == 0 or step == total):
            h = heldout_loss(model, heldout, device)
            curve.append({"step": step, "train_loss": float(loss), "heldout_loss": h})
            log(f"  step {step}/{total} train {float(loss):.3f} held-out {h:.3f} "
                f"({time.time() - start:.0f}s)")
    sync(device)
    seconds = time.time() - start
    model.eval()
    return {"steps": step, "tokens": step * cfg.batch * cfg.context, "seconds": seconds,
            "tokens_per_s": step * cfg.batch * cfg.context / max(seconds, 1e-9),
            "train_loss": losses, "curve": curve}


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()

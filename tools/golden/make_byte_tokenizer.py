#!/usr/bin/env python3
"""Writes a 512-token byte-level BPE tokenizer (tokenizer.json + tokenizer_config.json) whose
vocabulary fits the tiny fixture models (vocab_size 512), so engine and server tests can run
text through them. Ids: 0 <pad>, 1 <s>, 2 </s> (special; the fixtures' bos/eos ids), 3..258 the
256 byte-level symbols (GPT-2's byte-to-unicode map, by byte value), 259..511 merges learned by
plain BPE over tests/fixtures/tokenizer/corpus/prose_en.txt. Every id decodes to text.

    tools/golden/make_byte_tokenizer.py tests/fixtures/models/llama3
"""
import collections
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SPECIALS = ["<pad>", "<s>", "</s>"]
VOCAB_SIZE = 512


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def main():
    out = pathlib.Path(sys.argv[1])
    byte_map = bytes_to_unicode()
    vocab = {s: i for i, s in enumerate(SPECIALS)}
    for b in range(256):
        vocab[byte_map[b]] = len(vocab)
    text = (ROOT / "tests/fixtures/tokenizer/corpus/prose_en.txt").read_text(errors="replace")
    words = collections.Counter(
        "".join(byte_map[b] for b in w.encode()) for w in re.findall(r" ?[A-Za-z]+| ?[0-9]| ?[^\sA-Za-z0-9]+|\s+", text))
    splits = {w: list(w) for w in words}
    merges = []
    while len(vocab) < VOCAB_SIZE:
        pairs = collections.Counter()
        for w, n in words.items():
            s = splits[w]
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] += n
        # Most frequent pair; ties by the pair itself, so the file is reproducible.
        (a, b), _ = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))
        merges.append(f"{a} {b}")
        vocab[a + b] = len(vocab)
        for w in words:
            s, i, merged = splits[w], 0, []
            while i < len(s):
                if i + 1 < len(s) and s[i] == a and s[i + 1] == b:
                    merged.append(a + b)
                    i += 2
                else:
                    merged.append(s[i])
                    i += 1
            splits[w] = merged
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": i, "content": s, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}
                         for i, s in enumerate(SPECIALS)],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }
    config = {
        "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>",
        "add_bos_token": False, "add_eos_token": False,
        "model_max_length": 1024,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n"
                         "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}",
    }
    (out / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False, indent=1) + "\n")
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=1) + "\n")


if __name__ == "__main__":
    main()

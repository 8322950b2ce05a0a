"""models/README.md of ringlm's default models, written by train.py from its run record."""

LICENCE = """\
## Licence reasoning

The training text is public domain; nothing else went into the weights.

- **King James Version** (1611), from Debian's `bible-kjv-text`. It is public domain in the
  United States and in most countries: any copyright in a 1611 translation expired long ago
  (Debian's copyright file: "The copyright for the King James Version text of the Bible is
  expired"). Caveat: in the United Kingdom the Crown claims perpetual rights in the Authorized
  Version through letters patent (a royal prerogative, not copyright), exercised by the King's
  Printer (Cambridge University Press); they govern printing and publishing the text there.
  These models contain weights trained on the text, not the text as such; anyone redistributing
  them in the UK should weigh that caveat.
- **The Devil's Dictionary**, Ambrose Bierce, from Debian's `dict-devil`. Published 1911
  (Bierce disappeared in 1914): public domain in the United States (published before 1929) and in
  every life+70 (or shorter) country. The Internet Wiretap transcription (1993) that Debian packages
  is marked "A Public Domain Text, Copyright Expired" and claims nothing new.
- `bible-kjv` (the GPL-2+ `bible` program) is only *run* by `tools/train/prep_data.py` to print
  the KJV text from its compressed file; none of its code is in the data or the models.
- `dict-gcide` (GPL), `dict-jargon`, `dict-foldoc` and `dict-vera` (GFDL) are deliberately not
  used: they are not public domain.

The tokenizer and the weights were trained by the ringlm project from that text with its own code
(`tools/train/`) and are distributed with ringlm under the ringlm repository's terms.
"""


def fmt_bytes(n):
    return f"{n / 2**20:.1f} MiB"


def write(path, rec):
    m = rec["models"]
    man = rec["manifest"]
    out = ["# ringlm's default models", ""]
    if rec["smoke"]:
        out += ["**SMOKE RUN — a dozen training steps, not for shipping.**", ""]
    out += [
        "Tiny models trained by the project (`tools/train/`) on public-domain English text shipped",
        "by Debian 12 packages: the King James Bible and Ambrose Bierce's *The Devil's Dictionary*.",
        "They continue that kind of text and answer a small chat format built from it (continue a",
        "verse, quote a verse by reference, define a word). They are demonstration and test models,",
        "not assistants: expect pious or cynical nonsense outside their corpus.",
        "",
        "| model | architecture | parameters | weights | files | held-out text loss (ppl) "
        "| held-out chat loss (ppl) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in m.items():
        size = sum(f["bytes"] for f in r["files"])
        out.append(
            f"| `{name}` | {arch(r)} | {r['parameters'] / 1e6:.1f}M | {r['save_dtype']} "
            f"| {fmt_bytes(size)} | {r['heldout_text_loss']:.3f} ({r['heldout_text_ppl']:.2f}) "
            f"| {r['heldout_chat_loss']:.3f} ({r['heldout_chat_ppl']:.2f}) |")
    out += [
        "",
        "Loss is the mean next-token cross-entropy (nats per token of this 4096-token tokenizer) of",
        "the saved weights computed in float32 by transformers, on text held out of training:",
        f"KJV chapters with running index ≡ {man['heldout_rule']['kjv_chapter_index_mod'][1]} "
        f"(mod {man['heldout_rule']['kjv_chapter_index_mod'][0]}) and dictionary entries with "
        f"index ≡ {man['heldout_rule']['devil_entry_index_mod'][1]} "
        f"(mod {man['heldout_rule']['devil_entry_index_mod'][0]}) "
        f"({rec['tokens']['heldout_text_tokens']:,} tokens), and the chat examples made from them "
        f"({rec['tokens']['heldout_chat_tokens']:,} tokens).",
    ]
    if rec.get("draft_llama_greedy_agreement") is not None:
        out += ["", f"`ringlm-kjv-draft` shares the tokenizer and predicts the same greedy next "
                f"token as `ringlm-kjv-llama` at {100 * rec['draft_llama_greedy_agreement']:.1f}% "
                "of held-out positions (its use: the draft of speculative decoding)."]
    out += ["", "All share one tokenizer: byte-level BPE, 4096 tokens, special tokens "
            + ", ".join(f"`{t}`" for t in rec["tokenizer"]["special_tokens"])
            + " (ids 0–5). Encoding with special tokens prepends `<s>`. Chat template:", "",
            "    <s><|user|>", "    Define cynic.</s>", "    <|assistant|>",
            "    CYNIC, n. A blackguard whose ...</s>", "",
            "`<|system|>` turns are accepted too; generation stops at `</s>` (id 2).", ""]
    out += ["## Provenance", "",
            "| Debian 12 package | version | .deb sha256 |", "|---|---|---|"]
    for pkg, p in man["packages"].items():
        out.append(f"| `{pkg}` | {p['version']} | `{p['sha256']}` |")
    out += ["",
            f"`tools/train/prep_data.py` unpacks them (dpkg-deb -x), prints the {man['kjv_verses']:,}",
            f"KJV verses with the package's own `bible` program and reads the {man['devil_entries']}",
            "dictionary entries from the dictd files; it writes one document per KJV chapter and per",
            "entry, plus chat examples (" + ", ".join(man["chat_kinds"]) + ") from seeded random",
            "draws. Data files used (sha256):", ""]
    for f in rec["data_files"]:
        out.append(f"- `{f['name']}` ({f['bytes']:,} bytes) `{f['sha256']}`")
    out += ["", f"{rec['tokens']['train_tokens']:,} training tokens. Training (seed "
            f"{rec['seed']}, {rec['device_name']}, torch {rec['versions']['torch']}, transformers "
            f"{rec['versions']['transformers']}): AdamW (β 0.9/0.95, weight decay 0.1), linear "
            "warm-up then cosine decay to 10%, bf16 autocast, random 512-token windows.", "",
            "| model | steps | batch | peak lr | tokens seen | epochs | seconds |",
            "|---|---|---|---|---|---|---|"]
    for name, r in m.items():
        out.append(f"| `{name}` | {r['steps']} | {r['batch']} | {r['lr']:g} | {r['tokens']:,} "
                   f"| {r['epochs_done']:.1f} | {r['seconds']:.0f} |")
    out += ["", f"Whole run: {rec['wall_seconds']:.0f} s. Full record: `train_log.json`.", "",
            LICENCE, "## Sample outputs (greedy, transformers, float32)", ""]
    for name, r in m.items():
        out += [f"### {name}", ""]
        for s in r["samples"]:
            label = "continue" if s["kind"] == "text" else "chat"
            out += [f"- {label}: `{one_line(s['prompt'])}` → {one_line(s['output'])}"]
        out.append("")
    out += ["## Tests", "",
            "`tests/models/default_models_test.cc` checks each model against",
            "`tests/fixtures/goldens/NAME.safetensors` (transformers: logits at every prompt "
            "position, greedy continuation, tokenizer ids, chat-template prompt and answer) and "
            "runs `ringlm chat` on the default model.", ""]
    with open(path, "w") as f:
        f.write("\n".join(out))


def arch(r):
    c = r["config"]
    text = ("Llama" if r["config_class"] == "LlamaConfig" else "Gemma 3 (gemma3_text)")
    text += f", {c['num_hidden_layers']} layers × {c['hidden_size']}"
    if "sliding_window" in c:
        full = sum(t == "full_attention" for t in c["layer_types"])
        text += f", window {c['sliding_window']} on {len(c['layer_types']) - full} layers"
    return text


def one_line(text):
    text = text.replace("\n", " ⏎ ").replace("|", "\\|").replace("`", "'")
    return text if len(text) < 400 else text[:400] + " …"



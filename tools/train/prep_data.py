#!/usr/bin/env python3
"""Builds the training corpus of ringlm's default models from public-domain text in Debian 12
packages (run on the development machine; the result is carried to the GPU machine).

Sources (pinned versions; fetched with `apt-get download` into --debs unless already there):
  bible-kjv-text 4.38   the King James Version (1611), compressed for the `bible` program
  bible-kjv      4.38   the `bible` program (GPL-2+) that prints that text; only run, not shipped
  dict-devil 1.0-13.1   Ambrose Bierce, The Devil's Dictionary (1911), dictd format
Nothing is installed: the .debs are unpacked with dpkg-deb -x into a temporary folder.

Writes into --out (default .carry/train-data), every file deterministic (no clock, fixed seeds):
  text_train.jsonl / text_heldout.jsonl   {"source", "id", "text"}: one KJV chapter or one
                                          dictionary entry per line
  chat_train.jsonl / chat_heldout.jsonl   {"kind", "messages": [{"role", "content"}, ...]}
  manifest.json                           packages, .deb sha256, split rule, counts, file sha256
Held out: every KJV chapter whose running index (0..1188) is 7 mod 50, every dictionary entry
whose index is 3 mod 25; chat examples are made from the side their verse or entry is on.
Usage: prep_data.py [--out DIR] [--debs DIR]
"""
import argparse
import gzip
import hashlib
import json
import os
import random
import re
import subprocess
import tempfile

PACKAGES = {"bible-kjv-text": "4.38", "bible-kjv": "4.38", "dict-devil": "1.0-13.1"}
HELDOUT_CHAPTER = (50, 7)   # chapter index % 50 == 7
HELDOUT_ENTRY = (25, 3)     # entry index % 25 == 3
SEED = 1611

# The `bible` program's book abbreviations, in canonical order, with the names used in the corpus.
BOOKS = [
    ("Ge", "Genesis"), ("Exo", "Exodus"), ("Lev", "Leviticus"), ("Num", "Numbers"),
    ("Deu", "Deuteronomy"), ("Josh", "Joshua"), ("Jdgs", "Judges"), ("Ruth", "Ruth"),
    ("1Sm", "1 Samuel"), ("2Sm", "2 Samuel"), ("1Ki", "1 Kings"), ("2Ki", "2 Kings"),
    ("1Chr", "1 Chronicles"), ("2Chr", "2 Chronicles"), ("Ezra", "Ezra"), ("Neh", "Nehemiah"),
    ("Est", "Esther"), ("Job", "Job"), ("Psa", "Psalms"), ("Prv", "Proverbs"),
    ("Eccl", "Ecclesiastes"), ("SSol", "Song of Solomon"), ("Isa", "Isaiah"),
    ("Jer", "Jeremiah"), ("Lam", "Lamentations"), ("Eze", "Ezekiel"), ("Dan", "Daniel"),
    ("Hos", "Hosea"), ("Joel", "Joel"), ("Amos", "Amos"), ("Obad", "Obadiah"), ("Jonah", "Jonah"),
    ("Mic", "Micah"), ("Nahum", "Nahum"), ("Hab", "Habakkuk"), ("Zep", "Zephaniah"),
    ("Hag", "Haggai"), ("Zec", "Zechariah"), ("Mal", "Malachi"), ("Mat", "Matthew"),
    ("Mark", "Mark"), ("Luke", "Luke"), ("John", "John"), ("Acts", "Acts"), ("Rom", "Romans"),
    ("1Cor", "1 Corinthians"), ("2Cor", "2 Corinthians"), ("Gal", "Galatians"),
    ("Eph", "Ephesians"), ("Phi", "Philippians"), ("Col", "Colossians"),
    ("1Th", "1 Thessalonians"), ("2Th", "2 Thessalonians"), ("1Tim", "1 Timothy"),
    ("2Tim", "2 Timothy"), ("Titus", "Titus"), ("Phmn", "Philemon"), ("Heb", "Hebrews"),
    ("Jas", "James"), ("1Pet", "1 Peter"), ("2Pet", "2 Peter"), ("1Jn", "1 John"),
    ("2Jn", "2 John"), ("3Jn", "3 John"), ("Jude", "Jude"), ("Rev", "Revelation"),
]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch_debs(debs_dir):
    """The pinned .debs, downloaded once; returns {package: path}."""
    os.makedirs(debs_dir, exist_ok=True)
    out = {}
    for pkg, version in PACKAGES.items():
        arch = "amd64" if pkg == "bible-kjv" else "all"
        path = os.path.join(debs_dir, f"{pkg}_{version}_{arch}.deb")
        if not os.path.exists(path):
            subprocess.run(["apt-get", "download", f"{pkg}={version}"], cwd=debs_dir, check=True)
        if not os.path.exists(path):
            raise SystemExit(f"apt-get download did not produce {path}")
        out[pkg] = path
    return out


def unpack(deb, dest):
    subprocess.run(["dpkg-deb", "-x", deb, dest], check=True)


def read_kjv(root):
    """[(book, chapter, verse, text)] in canonical order, printed by the package's own program."""
    result = subprocess.run(
        [os.path.join(root, "usr/bin/bible"), "-f", "-p", os.path.join(root, "usr/lib"),
         "Gen1:1-Rev22:21"], stdin=subprocess.DEVNULL, capture_output=True, check=True)
    names = dict(BOOKS)
    verses = []
    for line in result.stdout.decode("utf-8").splitlines():
        m = re.fullmatch(r"(\S+?)(\d+):(\d+) (.*)", line)
        if not m or m.group(1) not in names:
            raise SystemExit(f"unexpected line from bible: {line[:80]!r}")
        verses.append((names[m.group(1)], int(m.group(2)), int(m.group(3)), m.group(4).strip()))
    if len(verses) != 31102:
        raise SystemExit(f"expected 31102 verses, got {len(verses)}")
    return verses


def dictd_number(text):
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    value = 0
    for ch in text:
        value = value * 64 + alphabet.index(ch)
    return value


def read_devil(root):
    """[(headword, part_of_speech, body)] in index order; the dictd header entries are skipped."""
    base = os.path.join(root, "usr/share/dictd/devil")
    with gzip.open(base + ".dict.dz", "rb") as f:  # dictzip is gzip-compatible
        data = f.read()
    entries, seen = [], set()
    with open(base + ".index", encoding="utf-8") as f:
        for line in f:
            word, off, length = line.rstrip("\n").split("\t")
            if word.startswith("00database"):
                continue
            start = dictd_number(off)
            raw = data[start:start + dictd_number(length)].decode("utf-8").strip("\n")
            if start in seen:
                continue  # an alias of an entry already taken
            seen.add(start)
            m = re.match(r"([A-Z][A-Z0-9'. -]*?),\s+([a-z. ]+?\.)\s+(.*)", raw, re.S)
            if not m:
                continue  # entries without "HEADWORD, pos." are not definitions
            body = "\n".join(l.rstrip() for l in m.group(3).splitlines()).strip()
            entries.append((m.group(1).strip(), m.group(2).strip(), body))
    if len(entries) < 900:
        raise SystemExit(f"expected ~1000 dictionary entries, got {len(entries)}")
    return entries


def first_paragraph(body, limit=360):
    """The definition proper: the first paragraph, unwrapped, cut at a sentence end near `limit`."""
    para = re.sub(r"\s+", " ", body.split("\n\n")[0]).strip()
    if len(para) <= limit:
        return para
    cut = para.rfind(". ", 0, limit)
    return para[:cut + 1] if cut > 40 else para[:limit].rsplit(" ", 1)[0] + " ..."


def chapter_docs(verses):
    """[(chapter_index, book, chapter, [(verse, text)])]."""
    chapters = []
    for book, ch, v, text in verses:
        if not chapters or chapters[-1][1:3] != (book, ch):
            chapters.append((len(chapters), book, ch, []))
        chapters[-1][3].append((v, text))
    return chapters


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


def verse_chats(rng, book, ch, v, text):
    out = []
    words = text.split()
    if len(words) >= 8 and rng.random() < 0.45:
        k = len(words) // 2 + rng.randint(-2, 2)
        out.append({"kind": "continue_verse", "messages": [
            user("Continue this verse: " + " ".join(words[:k])), assistant(" ".join(words[k:]))]})
    if rng.random() < 0.2:
        out.append({"kind": "quote_verse", "messages": [
            user(f"Quote {book} {ch}:{v}."), assistant(text)]})
    return out


def entry_chats(rng, word, pos, body):
    answer = f"{word}, {pos} {first_paragraph(body)}"
    prompts = ["Define {w}.", "What is {w}?", "Define the word \"{w}\"."]
    chosen = rng.sample(prompts, 2)
    return [{"kind": "define_word", "messages": [user(p.format(w=word.lower())), assistant(answer)]}
            for p in chosen]


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".carry/train-data")
    ap.add_argument("--debs", default=".cache/train-debs")
    args = ap.parse_args()
    debs = fetch_debs(args.debs)
    with tempfile.TemporaryDirectory() as tmp:
        for pkg in PACKAGES:
            unpack(debs[pkg], tmp)
        verses = read_kjv(tmp)
        entries = read_devil(tmp)

    rng = random.Random(SEED)
    text = {"train": [], "heldout": []}
    chat = {"train": [], "heldout": []}
    for index, book, ch, chapter_verses in chapter_docs(verses):
        side = "heldout" if index % HELDOUT_CHAPTER[0] == HELDOUT_CHAPTER[1] else "train"
        body = "\n".join(f"{v} {t}" for v, t in chapter_verses)
        text[side].append({"source": "kjv", "id": f"{book} {ch}", "text": f"{book} {ch}\n{body}"})
        for v, t in chapter_verses:
            chat[side].extend(verse_chats(rng, book, ch, v, t))
    for index, (word, pos, body) in enumerate(entries):
        side = "heldout" if index % HELDOUT_ENTRY[0] == HELDOUT_ENTRY[1] else "train"
        text[side].append({"source": "devil", "id": word, "text": f"{word}, {pos} {body}"})
        chat[side].extend(entry_chats(rng, word, pos, body))
    for side in ("train", "heldout"):
        random.Random(SEED + 1).shuffle(chat[side])

    os.makedirs(args.out, exist_ok=True)
    files = {}
    for side in ("train", "heldout"):
        for kind, rows in (("text", text[side]), ("chat", chat[side])):
            name = f"{kind}_{side}.jsonl"
            write_jsonl(os.path.join(args.out, name), rows)
            files[name] = {"rows": len(rows), "sha256": sha256(os.path.join(args.out, name))}
    manifest = {
        "packages": {pkg: {"version": PACKAGES[pkg], "deb": os.path.basename(debs[pkg]),
                           "sha256": sha256(debs[pkg])} for pkg in PACKAGES},
        "kjv_verses": len(verses), "devil_entries": len(entries),
        "heldout_rule": {"kjv_chapter_index_mod": list(HELDOUT_CHAPTER),
                         "devil_entry_index_mod": list(HELDOUT_ENTRY)},
        "chat_kinds": sorted({c["kind"] for c in chat["train"]}),
        "seed": SEED, "files": files,
    }
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    total = sum(os.path.getsize(os.path.join(args.out, n)) for n in files)
    print(f"wrote {args.out}: {len(verses)} verses, {len(entries)} entries, "
          f"{sum(len(c) for c in chat.values())} chat examples, {total / 1e6:.1f} MB")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes the tokenizer test corpus (tests/fixtures/tokenizer/corpus/*.txt), deterministically.

Format of a corpus file: raw bytes; entries are separated by the two bytes 0x1E 0x0A ("\\x1e\\n", an
ASCII record separator on its own line). A trailing empty entry is dropped. Entries may contain any
bytes, including newlines and invalid UTF-8 (invalid_utf8.txt). The same splitting is implemented by
tools/golden/tokenizer_goldens.py and by the C++ tests/bench (tests/tokenizer/corpus.h).

Text is generated here from word lists and handwritten samples (tools/golden/corpus_samples.py):
no third-party text. Run: python3 tools/golden/make_tokenizer_corpus.py [--out DIR]
"""
import argparse
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus_samples as S  # noqa: E402

SEP = b"\x1e\n"

EN_WORDS = """the of and to a in is it you that he was for on are with as his they be at one have this
from or had by hot word but what some we can out other were all there when up use your how said an
each she which do their time if will way about many then them write would like so these her long make
thing see him two has look more day could go come did number sound no most people my over know water
than call first who may down side been now find any new work part take get place made live where after
back little only round man year came show every good me give our under name very through just form
sentence great think say help low line differ turn cause much mean before move right boy old too same
tell does set three want air well also play small end put home read hand port large spell add even land
here must big high such follow act why ask men change went light kind off need house picture try us
again animal point mother world near build self earth father head stand own page should country found
answer school grow study still learn plant cover food sun four between state keep eye never last let
thought city tree cross farm hard start might story saw far sea draw left late run while press close
night real life few north open seem together next white children begin got walk example ease paper
group always music those both mark often letter until mile river car feet care second book carry took
science eat room friend began idea fish mountain stop once base hear horse cut sure watch color face
wood main enough plain girl usual young ready above ever red list though feel talk bird soon body dog
family direct pose leave song measure door product black short numeral class wind question happen
complete ship area half rock order fire south problem piece told knew pass since top whole king space
heard best hour better true during hundred five remember step early hold west ground interest reach
fast verb sing listen six table travel less morning ten simple several vowel toward war lay against
pattern slow center love person money serve appear road map rain rule govern pull cold notice voice
unit power town fine certain fly fall lead cry dark machine note wait plan figure star box noun field
rest correct able pound done beauty drive stood contain front teach week final gave green oh quick
develop ocean warm free minute strong special mind behind clear tail produce fact street inch multiply
nothing course stay wheel full force blue object decide surface deep moon island foot system busy test
record boat common gold possible plane stead dry wonder laugh thousand ago ran check game shape equate
miss brought heat snow tire bring yes distant fill east paint language among tokenizer model inference
attention gradient tensor kernel latency throughput batch cache vocabulary merge byte unicode""".split()

CONTRACTIONS = ["don't", "can't", "won't", "it's", "I'm", "you're", "we've", "they'll", "she'd", "isn't",
                "WE'LL", "YOU'RE", "It'S", "o'clock", "rock'n'roll", "'quoted'", "y'all"]
PUNCT = [".", ".", ".", "!", "?", "...", ";", ":", " --", ",", "?!"]


def en_sentence(r):
    n = r.randint(4, 22)
    words = []
    for i in range(n):
        x = r.random()
        if x < 0.05:
            words.append(r.choice(CONTRACTIONS))
        elif x < 0.08:
            words.append(str(r.choice([r.randint(0, 9), r.randint(10, 999), r.randint(1000, 10**7)])))
        elif x < 0.10:
            words.append(r.choice(["(" + r.choice(EN_WORDS) + ")", '"' + r.choice(EN_WORDS) + '"',
                                   r.choice(EN_WORDS).upper(), r.choice(EN_WORDS).capitalize()]))
        else:
            words.append(r.choice(EN_WORDS))
        if r.random() < 0.07 and i < n - 1:
            words[-1] += ","
    s = " ".join(words)
    return s[0].upper() + s[1:] + r.choice(PUNCT)


def en_paragraph(r):
    return " ".join(en_sentence(r) for _ in range(r.randint(2, 9)))


def prose_en(r, target):
    out, size = [], 0
    while size < target:
        paras = [en_paragraph(r) for _ in range(r.randint(1, 5))]
        entry = r.choice(["\n\n", "\n", "\n\n\n", " "]).join(paras)
        if r.random() < 0.3:
            entry += "\n"
        out.append(entry)
        size += len(entry.encode())
    return out


def words_of(text):
    return [w for w in text.replace("\n", " ").split(" ") if w]


def prose_mixed(r, target):
    pools = {k: words_of(" ".join(v)) for k, v in S.LANGUAGES.items()}
    names = sorted(pools)
    out, size = [], 0
    while size < target:
        lang = r.choice(names)
        parts = []
        for _ in range(r.randint(5, 60)):
            src = lang if r.random() < 0.8 else r.choice(names + ["en"])
            parts.append(r.choice(EN_WORDS) if src == "en" else r.choice(pools[src]))
        sep = "" if lang in ("chinese_simplified", "chinese_traditional", "japanese", "thai") else " "
        entry = sep.join(parts)
        out.append(entry)
        size += len(entry.encode())
    return out


def multilingual():
    out = []
    for name, paras in S.LANGUAGES.items():
        out.extend(paras)
        out.append("\n\n".join(paras) + "\n")
    out.append(" ".join(p[0] for p in S.LANGUAGES.values()))
    return out


IDENTS = ["count", "value", "buffer", "index", "tokenizer", "result", "user_id", "maxLength", "isReady",
          "HTTPServer", "parse_json", "kvCache", "num_heads", "x", "y", "tmp", "self", "ctx", "_private"]


def code_snippets(r, target):
    out = list(S.CODE)
    size = sum(len(c.encode()) for c in out)
    while size < target:
        ind = r.choice(["    ", "  ", "\t", "        "])
        lines = []
        fn = r.choice(IDENTS) + "_" + str(r.randint(0, 99))
        style = r.random()
        if style < 0.5:
            lines.append(f"def {fn}({r.choice(IDENTS)}, {r.choice(IDENTS)}=None):")
            for _ in range(r.randint(2, 10)):
                a, b = r.choice(IDENTS), r.choice(IDENTS)
                lines.append(ind + r.choice([f"{a} = {b} + {r.randint(0, 1000)}", f"if {a} >= {b}:",
                                             f"return {a}[{r.randint(0, 9)}:]", f"{a}.append({b!r})",
                                             f"# TODO: handle {b} when {a} is empty", "pass",
                                             f"print(f\"{{{a}}} -> {{{b}!r}}\")"]))
        else:
            lines.append(f"static int {fn}(const {r.choice(['int', 'float', 'std::string'])}& {r.choice(IDENTS)}) {{")
            for _ in range(r.randint(2, 10)):
                a, b = r.choice(IDENTS), r.choice(IDENTS)
                lines.append(ind + r.choice([f"{a} += {b} * {r.randint(0, 64)};", f"if ({a} != {b}) {{ return -1; }}",
                                             f"std::cout << \"{a}=\" << {a} << '\\n';", f"// {a}: {b}",
                                             f"auto {a} = std::make_unique<{b.capitalize()}>();",
                                             f"{a}[{r.randint(0, 9)}] = 0x{r.randint(0, 0xffff):04X};"]))
            lines.append("}")
        entry = "\n".join(lines) + r.choice(["\n", "\n\n", "", "\r\n"])
        out.append(entry)
        size += len(entry.encode())
    return out


def numbers(r):
    out = []
    for _ in range(120):
        k = r.randint(0, 7)
        if k == 0:
            s = str(r.randint(0, 10 ** r.randint(1, 30)))
        elif k == 1:
            s = f"{r.uniform(-1e6, 1e6):.{r.randint(0, 8)}f}"
        elif k == 2:
            s = f"{r.randint(1, 999)},{r.randint(0, 999):03d},{r.randint(0, 999):03d}"
        elif k == 3:
            s = f"{r.randint(1900, 2100)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}T{r.randint(0, 23):02d}:{r.randint(0, 59):02d}Z"
        elif k == 4:
            s = f"+1 ({r.randint(200, 999)}) {r.randint(100, 999)}-{r.randint(1000, 9999)}"
        elif k == 5:
            s = f"{r.uniform(0, 1):.3e} 0x{r.getrandbits(64):x} 0b{r.getrandbits(12):b} 1e-{r.randint(1, 300)}"
        elif k == 6:
            s = "".join(r.choice("0123456789") for _ in range(r.randint(1, 40)))
        else:
            s = f"v{r.randint(0, 9)}.{r.randint(0, 99)}.{r.randint(0, 999)} ${r.randint(0, 99999)}.{r.randint(0, 99):02d} {r.randint(0, 100)}%"
        out.append(s if r.random() < 0.5 else f"about {s} units")
    out.append("١٢٣ ٤٥٦ ۱۲۳ १२३ ١٢٣٤٥٦٧ ①②③ ⅠⅡⅢ 12345678901234567890 ３１４")
    return out


def whitespace(r):
    atoms = [" ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2009", "\u200b", "\x0b", "\x0c",
             "\u2028", "\u0085"]
    out = ["", " ", "  ", "\n", "\n\n", "\t", " \t \n ", "   leading", "trailing   ", "  both  ",
           "a\n\n\nb", "a \n b", "a\t\tb", "word  \n  word", "\r\n\r\n", " " * 64, "\n" * 40, "\t" * 17,
           "x" + " " * 33 + "y", "end.   \n", "    indented\n        more\n"]
    for _ in range(150):
        parts = []
        for _ in range(r.randint(1, 12)):
            if r.random() < 0.5:
                parts.append("".join(r.choice(atoms) for _ in range(r.randint(1, 8))))
            else:
                parts.append(r.choice(EN_WORDS + ["é", "日本", "🙂", "123", "."]))
        out.append("".join(parts))
    return out


def emoji(r):
    out = [" ".join(S.EMOJI), "".join(S.EMOJI)]
    for _ in range(60):
        out.append(" ".join(r.choice(S.EMOJI) if r.random() < 0.4 else r.choice(EN_WORDS)
                            for _ in range(r.randint(1, 15))))
    return out


def special(r):
    out = [" ".join(S.SPECIAL_STRINGS), "".join(S.SPECIAL_STRINGS)]
    for tok in S.SPECIAL_STRINGS:
        out.append(f"before {tok} after")
        out.append(f"{tok}text{tok}")
        out.append(f"  {tok}  \n")
    partial = ["<|im_start", "<|eot_id|", "|im_end|>", "< s>", "<s >", "<|endoftext", "<<SYS>", "<think",
               "<｜end▁of", "<|reserved_special_token_5", "<|begin_of_text|><|begin_of_text|>"]
    out.extend(f"x {p} y" for p in partial)
    for _ in range(40):
        out.append(" ".join(r.choice(S.SPECIAL_STRINGS) if r.random() < 0.3 else r.choice(EN_WORDS)
                            for _ in range(r.randint(2, 20))))
    out.append("<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
               "<|im_start|>assistant\n<think>\n\n</think>\n\nHello!<|im_end|>\n")
    out.append("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
               "<|start_header_id|>assistant<|end_header_id|>\n\n4<|eot_id|>")
    out.append("<bos><start_of_turn>user\nhello<end_of_turn>\n<start_of_turn>model\nhi<end_of_turn>\n")
    out.append("<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello </s><s>[INST] more [/INST]")
    return out


def normalization(r):
    out = list(S.NORMALIZATION)
    out.append(" ".join(S.NORMALIZATION))
    for _ in range(40):
        out.append("".join(r.choice(S.NORMALIZATION + EN_WORDS + [" "]) for _ in range(r.randint(2, 12))))
    return out


# Blocks long assigned in Unicode (<= 10.0) so the regex/normalization tables of both sides agree.
BLOCKS = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x530, 0x58F), (0x5D0, 0x5EA),
          (0x620, 0x64A), (0x900, 0x97F), (0xE01, 0xE3A), (0x10A0, 0x10FF), (0x1E00, 0x1EFF),
          (0x2000, 0x206F), (0x20A0, 0x20BF), (0x2100, 0x214F), (0x2190, 0x21FF), (0x2200, 0x22FF),
          (0x2500, 0x257F), (0x3040, 0x309F), (0x30A0, 0x30FF), (0x4E00, 0x9FA5), (0xAC00, 0xD7A3),
          (0xFF01, 0xFF9F), (0x1F300, 0x1F5FF), (0x1F600, 0x1F64F), (0x1D400, 0x1D7FF), (0x20000, 0x2A6D6),
          (0xE000, 0xE0FF)]


def random_unicode(r):
    out = []
    for _ in range(150):
        lo, hi = r.choice(BLOCKS)
        chars = []
        for _ in range(r.randint(1, 40)):
            if r.random() < 0.7:
                cp = r.randint(lo, hi)
            else:
                blo, bhi = r.choice(BLOCKS)
                cp = r.randint(blo, bhi)
            chars.append(chr(cp))
            if r.random() < 0.15:
                chars.append(" ")
        out.append("".join(chars))
    return out


def long_words(r):
    alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/"
    return ["a" * 3000, "ab" * 700, "z" * 257, "あ" * 500, "😀" * 200, "-" * 400, "=" * 120 + "\n",
            "".join(r.choice(alnum) for _ in range(2000)) + "==",
            "".join(r.choice("0123456789abcdef") for _ in range(512)),
            "https://example.com/" + "/".join(r.choice(EN_WORDS) for _ in range(60)) + "?q=" + "x" * 100,
            "supercalifragilisticexpialidocious" * 20, "ĠĠĠĊĉ ▁▁▁ <0x41> Ġhello ▁world", "\x00\x01\x02\x7f"]


def invalid_utf8(r):
    """Byte strings that are not valid UTF-8 (HF gets them as bytes.decode('utf-8', 'replace'))."""
    bad = [b"\x80", b"\xbf", b"\xc0\xaf", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\xed\xa0\x80",
           b"\xed\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5", b"\xfe", b"\xff", b"\xfe\xff", b"\xe0\x80\x80",
           b"\xf8\x88\x80\x80\x80", b"\xc2\x41", b"\xe2\x28\xa1", b"\x80\x80\x80\x80"]
    out = [b"".join(bad)]
    for b in bad:
        out.append(b"abc" + b + b"def")
        out.append(b + b" " + b)
    good = [w.encode() for w in EN_WORDS[:200]] + ["é".encode(), "日本語".encode(), "😀".encode(), b" ", b"\n"]
    for _ in range(80):
        parts = []
        for _ in range(r.randint(1, 20)):
            x = r.random()
            if x < 0.25:
                parts.append(r.choice(bad))
            elif x < 0.35:
                parts.append(bytes([r.randint(0x80, 0xff)]))
            elif x < 0.4:
                whole = r.choice(good[-5:])
                parts.append(whole[: r.randint(0, len(whole))])
            else:
                parts.append(r.choice(good) + b" ")
        out.append(b"".join(parts))
    return out


def write(path, entries):
    with open(path, "wb") as f:
        for e in entries:
            b = e if isinstance(e, bytes) else e.encode("utf-8")
            assert SEP not in b, path
            f.write(b + SEP)


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "..", "tests", "fixtures", "tokenizer", "corpus"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    r = random.Random(20240601)
    files = {
        "prose_en.txt": prose_en(r, 110_000),
        "prose_mixed.txt": prose_mixed(r, 45_000),
        "multilingual.txt": multilingual(),
        "code.txt": code_snippets(r, 30_000),
        "numbers.txt": numbers(r),
        "whitespace.txt": whitespace(r),
        "emoji.txt": emoji(r),
        "special_tokens.txt": special(r),
        "normalization.txt": normalization(r),
        "random_unicode.txt": random_unicode(r),
        "long_words.txt": long_words(r),
        "invalid_utf8.txt": invalid_utf8(r),
    }
    total = 0
    for name, entries in files.items():
        write(os.path.join(args.out, name), entries)
        size = os.path.getsize(os.path.join(args.out, name))
        total += size
        print(f"{name}: {len(entries)} entries, {size} bytes")
    print(f"total {total} bytes")


if __name__ == "__main__":
    main()

# Handwritten text samples for the tokenizer corpus (written for ringlm; no third-party text).
# Each value is a list of short paragraphs in one language or script.

LANGUAGES = {
    "english": [
        "The quick brown fox jumps over the lazy dog, and then it naps under the old oak tree.",
        "I'm sure they'll say it's fine, but we've seen what happens when you don't check twice.",
        "She said: \"Don't touch that!\" -- and he didn't. THEY'LL NEVER KNOW, WE'RE SURE.",
        "On 3 March 2021, at 10:45 a.m., roughly 1,234,567 people watched the launch (or so we're told).",
        "Mr. O'Neil's dog isn't his; it's the neighbours' -- the Smiths' -- and it barks at 5am.",
    ],
    "french": [
        "L'été dernier, nous sommes allés à la mer ; c'était magnifique, même sous la pluie.",
        "Où est la bibliothèque ? Elle se trouve près de l'église, à côté du café « Chez Zoé ».",
        "Les élèves ont réussi l'épreuve grâce à leur persévérance et à l'aide de leurs professeurs.",
    ],
    "german": [
        "Die Straße war nass, und die Bäume rauschten im Wind. Größere Häuser standen am Fluss.",
        "Übermorgen fahren wir mit dem Zug nach München; die Fahrkarten kosten 49,90 €.",
        "Donaudampfschifffahrtsgesellschaftskapitänsmütze ist ein sehr langes Wort.",
    ],
    "spanish": [
        "¿Dónde está la estación? ¡No lo sé! Pregúntale al señor de la tienda, él sabrá.",
        "El niño comió una manzana y después jugó al fútbol con sus amigos en el parque.",
    ],
    "portuguese": [
        "A canção foi gravada em São Paulo; a população aplaudiu a atuação dos músicos.",
        "Não há razão para pressa: o ônibus só sai às três horas da tarde.",
    ],
    "italian": [
        "Perché non vieni con noi? Andiamo al ristorante più vicino, quello con la terrazza.",
    ],
    "polish": [
        "Zażółć gęślą jaźń. Wczoraj padał deszcz, a dziś świeci słońce nad Wisłą.",
    ],
    "czech": [
        "Příliš žluťoučký kůň úpěl ďábelské ódy. Čtvrtek je můj oblíbený den.",
    ],
    "turkish": [
        "İstanbul'da yaşıyorum; ılık bir sonbahar günü Boğaz'da yürüyüş yaptık. IĞDIR, ığdır.",
    ],
    "vietnamese": [
        "Tiếng Việt có nhiều dấu thanh: sắc, huyền, hỏi, ngã, nặng. Hà Nội mùa thu rất đẹp.",
        "Người ta nói rằng học ngoại ngữ giúp mở rộng tầm nhìn và hiểu biết về thế giới.",
    ],
    "russian": [
        "Съешь же ещё этих мягких французских булок да выпей чаю. Москва — столица России.",
        "Вчера мы гуляли по парку, а сегодня идёт снег. Ёлки стоят в инее.",
    ],
    "ukrainian": [
        "Щастя — це коли тебе розуміють. Їжак ґречно поїв яблуко біля річки.",
    ],
    "greek": [
        "Η γρήγορη καφέ αλεπού πηδά πάνω από τον τεμπέλη σκύλο. Ελλάδα, Αθήνα, ΣΟΦΙΑ.",
        "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Ἐν ἀρχῇ ἦν ὁ λόγος (πολυτονικό).",
    ],
    "arabic": [
        "اللغة العربية جميلة جداً، ويتحدث بها الملايين حول العالم. مرحباً بكم!",
        "قَالَ الْمُعَلِّمُ: الْعِلْمُ نُورٌ. الرقم ١٢٣٤٥ مكتوب بالأرقام العربية.",
    ],
    "hebrew": [
        "שלום עולם! היום יום יפה בירושלים, והשמש זורחת מעל ההרים.",
    ],
    "persian": [
        "زبان فارسی یکی از زبان‌های کهن جهان است؛ نیم‌فاصله در آن کاربرد دارد.",
    ],
    "hindi": [
        "हिन्दी भारत की एक प्रमुख भाषा है। आज मौसम बहुत अच्छा है, चलो बाहर चलते हैं।",
        "संख्याएँ: १२३४५६७८९० और क्षत्रिय, ज्ञान, श्री जैसे संयुक्ताक्षर।",
    ],
    "bengali": [
        "আমি বাংলায় গান গাই। কলকাতা একটি সুন্দর শহর।",
    ],
    "tamil": [
        "தமிழ் ஒரு பழமையான மொழி. வணக்கம், நீங்கள் எப்படி இருக்கிறீர்கள்?",
    ],
    "thai": [
        "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ สวัสดีครับ วันนี้อากาศดีมาก",
    ],
    "chinese_simplified": [
        "我们今天去公园散步，天气很好。学习中文需要耐心和坚持。",
        "人工智能正在改变世界，大型语言模型可以回答问题、写代码和翻译文章。",
    ],
    "chinese_traditional": [
        "臺灣的夜市很熱鬧，有很多好吃的小吃。龍鳳呈祥，萬事如意。",
    ],
    "japanese": [
        "今日はいい天気ですね。東京駅で友達と待ち合わせをしました。",
        "カタカナとひらがな、そして漢字を組み合わせて書きます。ｶﾀｶﾅ（半角）もあります。",
    ],
    "korean": [
        "안녕하세요! 오늘 날씨가 정말 좋네요. 한국어는 한글로 씁니다.",
        "서울에서 부산까지 기차로 약 세 시간 걸립니다.",
    ],
    "georgian": ["ქართული ენა ძალიან ლამაზია. გამარჯობა!"],
    "armenian": ["Բարեւ Ձեզ։ Հայերենը հնագույն լեզու է։"],
    "amharic": ["ሰላም ነው? አማርኛ በግዕዝ ፊደል ይጻፋል።"],
    "mongolian_cyrillic": ["Сайн байна уу? Монгол хэл үзэсгэлэнтэй."],
    "khmer": ["សួស្តី ពិភពលោក"],
    "tibetan": ["བཀྲ་ཤིས་བདེ་ལེགས།"],
    "sinhala": ["ආයුබෝවන්! ශ්‍රී ලංකාව"],
    "cherokee": ["ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ"],
    "math_symbols": [
        "∀x ∈ ℝ: x² ≥ 0. ∑_{i=1}^{n} i = n(n+1)/2. ∫₀^∞ e^{−x} dx = 1. ℵ₀ < 𝔠.",
        "𝐁𝐨𝐥𝐝 𝑖𝑡𝑎𝑙𝑖𝑐 𝕯𝖔𝖚𝖇𝖑𝖊 𝔽𝕣𝕒𝕜𝕥𝕦𝕣 ⅫⅣ ① ② ③ ¼ ½ ¾ ﬁ ﬂ ﬀ Å Ω µ ℃ ™ ㎏ ㍻",
    ],
}

CODE = [
    '''#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
    std::vector<int> xs{1, 2, 3};
    for (size_t i = 0; i < xs.size(); ++i) {
        std::printf("%zu: %d\\n", i, xs[i] * 2);
    }
    return argc > 1 ? 1 : 0;
}
''',
    '''def fibonacci(n: int) -> list[int]:
    """Return the first n Fibonacci numbers."""
    out = [0, 1]
    while len(out) < n:
        out.append(out[-1] + out[-2])
    return out[:n]


if __name__ == "__main__":
    print(fibonacci(10))  # [0, 1, 1, 2, 3, 5, 8, 13, 21, 34]
''',
    '''const express = require('express');
const app = express();

app.get('/api/items/:id', async (req, res) => {
  const item = await db.find({ id: Number(req.params.id) });
  if (!item) return res.status(404).json({ error: `not found: ${req.params.id}` });
  res.json(item);
});
''',
    '''fn main() {
    let words: Vec<&str> = "a b c".split_whitespace().collect();
    match words.len() {
        0 => println!("empty"),
        n if n > 2 => println!("{n} words"),
        _ => {}
    }
}
''',
    '''{"model": "llama", "layers": 32, "rope_theta": 500000.0, "tie": false,
 "eos_token_id": [128001, 128008, 128009], "name": "caf\\u00e9", "nested": {"a": [1, 2, {"b": null}]}}
''',
    '''<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>Test &amp; demo</title></head>
<body>
  <div class="row"><p id='x'>Hello,&nbsp;world!</p></div>
  <script>document.getElementById("x").innerText += " &lt;3";</script>
</body>
</html>
''',
    '''#!/usr/bin/env bash
set -euo pipefail
for f in "$@"; do
  if [[ -f "$f" ]]; then
    wc -l "$f" | awk '{print $1}' >> /tmp/counts.txt
  fi
done
echo "done: $(date +%s)" 2>&1 | tee -a log.txt
''',
    '''SELECT u.id, u.name, COUNT(o.id) AS orders
FROM users u LEFT JOIN orders o ON o.user_id = u.id
WHERE u.created_at >= '2024-01-01' AND u.email LIKE '%@example.com'
GROUP BY u.id, u.name
HAVING COUNT(o.id) > 3
ORDER BY orders DESC;
''',
    '''package main

import "fmt"

type Point struct{ X, Y float64 }

func (p Point) String() string { return fmt.Sprintf("(%.2f, %.2f)", p.X, p.Y) }

func main() {
\tpts := []Point{{1, 2}, {3.5, -4}}
\tfor _, p := range pts {
\t\tfmt.Println(p)
\t}
}
''',
    '''\\documentclass{article}
\\begin{document}
$$\\frac{\\partial L}{\\partial \\theta} = \\sum_{i=1}^{N} \\nabla_\\theta \\log p(x_i \\mid \\theta)$$
\\end{document}
''',
    '''# Title

* item one
* item **two** with `code` and [a link](https://example.com/path?q=1&r=2#frag)

| a | b |
|---|---|
| 1 | 2 |

```python
print("hi")
```
''',
]

# Strings that are special tokens in at least one of the test tokenizers, embedded in text.
SPECIAL_STRINGS = [
    "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>",
    "<|reserved_special_token_5|>", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>",
    "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<s>", "</s>", "<unk>", "<pad>", "<bos>", "<eos>",
    "<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<mask>", "<｜begin▁of▁sentence｜>",
    "<｜end▁of▁sentence｜>", "<|endofprompt|>", "[INST]", "[/INST]", "<<SYS>>",
]

EMOJI = [
    "😀", "😂", "🥲", "👍", "👍🏽", "👍🏿", "❤️", "❤", "🔥", "✨", "🎉", "🤖", "🦀", "🐍",
    "👨‍👩‍👧‍👦", "👩‍💻", "🧑🏾‍🚀", "🏳️‍🌈", "🏴‍☠️", "👁️‍🗨️", "🇺🇸", "🇯🇵", "🇩🇪", "🇧🇷",
    "1️⃣", "#️⃣", "©️", "™️", "☺️", "🫠", "🧪", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "👩🏻‍❤️‍💋‍👨🏼",
]

# Compatibility and normalization-sensitive strings (NFC/NFKC/NFD differ on them).
NORMALIZATION = [
    "e\u0301cole", "\u00e9cole", "A\u030a", "\u212b", "\u1e9b\u0323", "n\u0303", "\uac00", "\u1100\u1161",
    "\ufb01", "\uff21\uff22\uff23", "\u2460", "\u00b2", "\u2167", "\u00bd", "\u3000", "\u00a0",
    "\u2009", "\u202f", "\u200b", "\u200d", "\ufeff", "\u0301\u0301\u0301", "o\u0308\u0304", "\u0e01\u0e33",
    "\u1f00\u0345", "\u0958", "\u2126", "\u00c5", "\uff76\uff9e", "\u3099", "\u304b\u3099",
]

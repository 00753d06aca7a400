"""Deterministic test strings for the tokenizer parity test: every script the corpus has, code, numbers
of every length, whitespace and line-break mixes, emoji sequences, every added token in and between
words, and text that merely looks broken. The same seed always gives the same list.
"""
import os
import random

EMOJI = [
    "😀", "😂", "🤣", "😊", "😍", "🤔", "🙃", "🫠", "🥳", "😱", "🔥", "💯", "✅", "❌", "⚠️", "⭐", "☕", "🍕",
    "🐶", "🦊", "🐙", "🌧️", "⛅", "🌞", "❤️", "💔", "🧡", "🇯🇵", "🇺🇸", "🇰🇷", "🇮🇳", "🏳️‍🌈", "🏴‍☠️",
    "👨‍👩‍👧‍👦", "👩‍👩‍👦", "👩🏻‍💻", "👨🏿‍🔬", "🧑🏽‍🚀", "👩🏼‍🍳", "🏃‍♀️", "❤️‍🔥", "❤️‍🩹", "1️⃣", "#️⃣", "*️⃣",
    "👍", "👍🏻", "👍🏼", "👍🏽", "👍🏾", "👍🏿", "👋🏽", "🙏🏿", "✌️", "🤞🏼", "🫶🏾", "🧔🏻‍♂️", "👁️‍🗨️",
]
SKIN_TONES = ["\U0001F3FB", "\U0001F3FC", "\U0001F3FD", "\U0001F3FE", "\U0001F3FF"]
ZWJ = "\u200d"
WHITESPACE = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r", "\r\n", "\r\n\r\n", "\n\r", " \n", "\n ", " \t ",
              "\u00a0", "\u3000", "\u2009", "\u2002", "\u200a", "\u202f", "\u205f", "\u1680", "\u0085", "\u2028",
              "\u2029", "\u000b", "\u000c", "\u180e", "\u200b", "\ufeff", "    ", "\t \t", "\r\r\n"]
WORDS = ("the of and to in is that it for on with as was at by an be this from or which are not have had "
         "token model server stream byte merge vocabulary pre-tokenizer UTF-8 Hello World don't I'm we'll "
         "they've she'd it's you're O'Brien e-mail re-use naïve café résumé Zürich façade jalapeño").split()
NUMERIC_EXTRAS = ["٠١٢٣٤٥٦٧٨٩", "०१२३४५६७८९", "๐๑๒๓๔๕๖๗๘๙", "１２３４５", "²³¹", "½¾⅓", "Ⅻ", "Ⅳ", "①②③", "𝟙𝟚𝟛",
                  "㊀㊁", "〇", "三千"]
ODD = ["\ufffd", "\ufffd\ufffd", "a\ufffdb", "\ufeffBOM", "\ue000\uf8ff", "\U000F0000", "\ufffe", "\uffff",
       "\u0000", "\u0001\u0002\u001f", "\u007f", "\u0080\u0085\u009f", "\u0301", "\u0301\u0301abc", "e\u0301",
       "\u200d", "\u200c", "\ufe0f", "\ufe0f\ufe0f", "\u202e", "\u2066x\u2069", "\U0001F3FB", "\U000E0041",
       "\U0001D400\U0001D401", "\U00010348", "\u1f60", "ǅ", "ﬁ", "Ꙭ", "\u0600\u0601", "\u06dd", "\u0e33\u0e33",
       "\ud7a3\u3131\u314f", "\u1100\u1161\u11a8", "\u2e80\u2fd5", "\u9fa6\u9fff", "\u3400\u4dbf", "\U00020000",
       "\u4e00", "\u9fa5", "\u3040", "\u309f", "\u30a0", "\u30ff", "\u31f0", "\uff66\uff9d", "\u3005\u3006\u3007"]


def corpus_lines(corpus_dir):
    lines = []
    for name in sorted(os.listdir(corpus_dir)):
        if name.endswith(".txt"):
            with open(os.path.join(corpus_dir, name), encoding="utf-8", newline="") as f:
                lines.extend((name, l) for l in f.read().split("\n") if l.strip())
    return lines


def random_slice(rng, text):
    if len(text) < 2:
        return text
    a = rng.randrange(len(text))
    b = rng.randrange(a, min(len(text), a + 80) + 1)
    return text[a:b]


def generate(corpus_dir, added_tokens, seed=20261130):
    """added_tokens: the contents of every added token of the tokenizer under test."""
    rng = random.Random(seed)
    lines = corpus_lines(corpus_dir)
    texts = [l for _, l in lines]
    out = []

    # 1. Every corpus line as it is, then random slices (odd starts and ends inside words and scripts).
    out.extend(texts)
    for _ in range(600):
        out.append(random_slice(rng, rng.choice(texts)))

    # 2. Numbers of every length 1..30, bare and inside text, plus non-ASCII numerals.
    for n in range(1, 31):
        for k in range(4):
            digits = "".join(rng.choice("0123456789") for _ in range(n))
            out.append([digits, f"x{digits}y", f" {digits} ", f"{digits}.{digits[:3]}"][k])
        out.append("-" + "9" * n + ",5")
        out.append("1" * n + "abc" + "2" * n)
    for extra in NUMERIC_EXTRAS:
        out.extend([extra, f"a{extra}b", f"{extra}123", f"12 {extra} 34"])
    for _ in range(60):
        out.append(" ".join(str(rng.randrange(10 ** rng.randrange(1, 15))) for _ in range(rng.randrange(1, 6))))

    # 3. Whitespace runs, tabs, CR/LF mixes, at the start, middle and end.
    for ws in WHITESPACE:
        out.extend([ws, f"a{ws}b", f"{ws}word", f"word{ws}", f"{ws}{ws}x{ws}", f"x{ws}1", f"。{ws}你好", f"!{ws}?"])
    for _ in range(150):
        parts = []
        for _ in range(rng.randrange(1, 8)):
            parts.append(rng.choice(WORDS + ["你好", "テスト", "한국어", "مرحبا", "नमस्ते", "สวัสดี", "123", "!!"]))
            parts.append("".join(rng.choice(WHITESPACE) for _ in range(rng.randrange(0, 4))))
        out.append("".join(parts))

    # 4. Emoji: ZWJ sequences, skin tones, flags, keycaps, with and without text around.
    for e in EMOJI:
        out.extend([e, f"a{e}b", f" {e} ", e * 3, f"{e}{ZWJ}", f"{e}123"])
    for _ in range(150):
        s = ""
        for _ in range(rng.randrange(1, 8)):
            r = rng.random()
            if r < 0.5:
                s += rng.choice(EMOJI)
            elif r < 0.65:
                s += rng.choice(SKIN_TONES)
            elif r < 0.75:
                s += ZWJ
            else:
                s += rng.choice(WORDS + [" ", "\n", "你", "😀😀"])
        out.append(s)

    # 5. Every added token alone, mid-word, next to each other, spaced, and broken prefixes of it.
    for t in added_tokens:
        other = rng.choice(added_tokens)
        out.extend([t, f"abc{t}def", f"{t}{t}", f"{t}{other}", f" {t} ", f"\n{t}\n", f"你{t}好", f"1{t}2",
                    f"😀{t}😀", f"{t[:-1]}", f"{t[1:]}", f"<{t}>", f"{t[:len(t) // 2]} {t[len(t) // 2:]}"])
    for _ in range(150):
        parts = [rng.choice(added_tokens + WORDS + [" ", "\n", "<", ">", "|", "｜", "▁"])
                 for _ in range(rng.randrange(2, 10))]
        out.append("".join(parts))

    # 6. Text that only looks broken: replacement characters, controls, lone marks, private use, BOM.
    for odd in ODD:
        out.extend([odd, f"x{odd}y", f"{odd} {odd}", f"{odd}123", f"你{odd}"])

    # 7. Mixed scripts and random code points from many blocks (no surrogates).
    blocks = [(0x20, 0x7e), (0xa0, 0x24f), (0x370, 0x3ff), (0x400, 0x4ff), (0x590, 0x5ff), (0x600, 0x6ff),
              (0x900, 0x97f), (0xe00, 0xe7f), (0x1100, 0x11ff), (0x2000, 0x206f), (0x2190, 0x23ff),
              (0x3000, 0x30ff), (0x4e00, 0x9fff), (0xac00, 0xd7a3), (0xff00, 0xffef), (0x1f300, 0x1faff)]
    for _ in range(300):
        s = ""
        for _ in range(rng.randrange(1, 20)):
            lo, hi = rng.choice(blocks)
            s += chr(rng.randrange(lo, hi + 1))
        out.append(s)
    for _ in range(200):
        out.append("".join(random_slice(rng, rng.choice(texts)) for _ in range(rng.randrange(2, 5))))

    # 8. A few long texts (whole corpus files glued together) for long pieces and long runs.
    out.append("\n".join(texts))
    out.append("a" * 5000)
    out.append(" " * 3000 + "x")
    out.append("你" * 3000)
    out.append("1234567890" * 300)
    out.append("😀" * 1000)
    out.append("")
    return out

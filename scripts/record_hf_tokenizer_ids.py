#!/usr/bin/env python3
"""Records how Hugging Face `tokenizers` encodes text with bytes a vocabulary lacks.

Usage: python3 scripts/record_hf_tokenizer_ids.py tests/data/tokenizers

Needs `tokenizers==0.22.2` (pip install into any Python environment). In the folder given:
- torchtitan_test/ holds TorchTitan's own test tokenizer (tests/assets/tokenizer in its
  repository, BSD-3-Clause): a byte-level BPE without merges whose vocabulary lacks the
  byte-level characters of most bytes outside printable ASCII (space among them);
- the recorder writes four constructed byte-level BPE tokenizers, one per way Hugging Face's
  BPE treats a character missing from the vocabulary: missing_bytes_drop (no unk_token: the
  character is dropped), missing_bytes_unk (unk_token), missing_bytes_fuse_unk (consecutive
  unknowns fused) and missing_bytes_byte_fallback (`<0xHH>` tokens, else unk_token);
and into each of the five folders reference_ids.jsonl: one line per text of TEXTS with the
ids `Tokenizer.from_file(...).encode(text, add_special_tokens=False)` gives.
"""
import json
import os
import sys

from tokenizers import Tokenizer

TEXTS = [
    "hello world",
    "a\x00b",
    "\x00\x01\x02 control \x07\x1b[0m",
    "tab\there\nnew line\r\n",
    "emoji \U0001F600\U0001F680 end",
    "\u4e2d\u6587 CJK \u65e5\u672c\u8a9e",
    "caf\u00e9 na\u00efve \u00fcber",
    "x\x00y xy x\x00\x00y",
    "abc ab\x00c \x00abc",
    "<|begin_of_text|>hi<|end_of_text|>",
    "zzz zebra xzy xzzy azbzc",
    "   leading and trailing   ",
    "",
    "\x00",
    "\U0001F600",
]


def byte_level_alphabet():
    """GPT-2's byte -> character table (printable bytes map to themselves)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


# Bytes the constructed vocabularies lack: NUL, 0x01, space, 'z', the lead byte of CJK
# characters (0xE4..0xE6) and of emoji (0xF0).
MISSING = [0x00, 0x01, 0x20, ord("z"), 0xE4, 0xE5, 0xE6, 0xF0]
# Merges, some across a missing byte once it is dropped ("x\0y" -> x y -> "xy").
MERGES = [("a", "b"), ("ab", "c"), ("x", "y"), ("h", "e"), ("he", "l"), ("l", "o")]


def constructed(unk, fuse_unk, byte_fallback):
    chars = byte_level_alphabet()
    vocab = {}
    for b in range(256):
        if b not in MISSING:
            vocab[chars[b]] = len(vocab)
    for left, right in MERGES:
        vocab[left + right] = len(vocab)
    if unk:
        vocab["<unk>"] = len(vocab)
    if byte_fallback:
        # 0x00 is 'Ā' (UTF-8 C4 80): both fallback tokens exist. 0x01 is 'ā' (C4 81): <0x81>
        # is missing, so it falls back to unk. 0xF0 is 'ð' (C3 B0): both exist.
        for token in ["<0xC4>", "<0x80>", "<0xC3>", "<0xB0>"]:
            vocab[token] = len(vocab)
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>" if unk else None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": fuse_unk, "byte_fallback": byte_fallback, "ignore_merges": False,
                  "vocab": vocab, "merges": [[a, b] for a, b in MERGES]},
    }


VARIANTS = {
    "missing_bytes_drop": constructed(unk=False, fuse_unk=False, byte_fallback=False),
    "missing_bytes_unk": constructed(unk=True, fuse_unk=False, byte_fallback=False),
    "missing_bytes_fuse_unk": constructed(unk=True, fuse_unk=True, byte_fallback=False),
    "missing_bytes_byte_fallback": constructed(unk=True, fuse_unk=False, byte_fallback=True),
}


def main():
    root = sys.argv[1]
    for name, doc in VARIANTS.items():
        os.makedirs(f"{root}/{name}", exist_ok=True)
        with open(f"{root}/{name}/tokenizer.json", "w") as f:
            json.dump(doc, f, ensure_ascii=False, indent=1)
    for name in ["torchtitan_test", *VARIANTS]:
        tokenizer = Tokenizer.from_file(f"{root}/{name}/tokenizer.json")
        with open(f"{root}/{name}/reference_ids.jsonl", "w") as f:
            for text in TEXTS:
                ids = tokenizer.encode(text, add_special_tokens=False).ids
                f.write(json.dumps({"text": text, "ids": ids}) + "\n")


if __name__ == "__main__":
    main()

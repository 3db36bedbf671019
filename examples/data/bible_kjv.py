#!/usr/bin/env python3
"""The King James Bible as a character-level token stream for a language model.

    apt-get install bible-kjv
    /usr/bin/python3 examples/data/bible_kjv.py bible_kjv.h5

Reads the whole text with `bible -f "Gen1:1-Rev22:21"` (Debian's bible-kjv),
strips the verse references ("Ge1:1 "), joins the verses with newlines, maps
every distinct character to an int32 token (vocabulary sorted by code point,
stored as the attribute `vocabulary`) and splits the stream 90/10 into
/train/tokens and /test/tokens. Token-stream datasets are for the transformer
(DESIGN.md §5); the MLP decks do not read them.
"""
import re
import subprocess
import sys

import h5py
import numpy as np

FORMAT = "kpipe-dataset"
FORMAT_VERSION = 1
REFERENCE = re.compile(r"^[1-3]?[A-Za-z]+\d+:\d+\s+")


def text():
    lines = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], check=True, capture_output=True,
                           text=True).stdout.splitlines()
    verses = [REFERENCE.sub("", line).strip() for line in lines]
    return "\n".join(verse for verse in verses if verse) + "\n"


def main(path):
    corpus = text()
    vocabulary = sorted(set(corpus))
    index = {c: i for i, c in enumerate(vocabulary)}
    tokens = np.fromiter((index[c] for c in corpus), dtype=np.int32, count=len(corpus))
    split = int(0.9 * len(tokens))
    with h5py.File(path, "w") as f:
        f.attrs["format"] = np.bytes_(FORMAT)
        f.attrs["format_version"] = np.int64(FORMAT_VERSION)
        f.attrs["source"] = np.bytes_("bible-kjv, Gen1:1-Rev22:21, verse references stripped")
        f.attrs["vocabulary"] = np.bytes_("".join(vocabulary).encode("utf-8"))
        f.attrs["vocabulary_size"] = np.int64(len(vocabulary))
        f.create_group("train").create_dataset("tokens", data=tokens[:split])
        f.create_group("test").create_dataset("tokens", data=tokens[split:])
    print(f"{path}: {len(tokens)} characters, vocabulary {len(vocabulary)}, "
          f"{split} train / {len(tokens) - split} test tokens")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: bible_kjv.py OUT.h5")
    main(sys.argv[1])

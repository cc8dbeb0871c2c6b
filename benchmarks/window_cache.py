"""The defaults of `--window` / `max_sentence_tokens` and `--word-cache` / `word_cache_size`:
how many lines of a text run as windows, and how many token lookups a word cache of N
entries answers, with the memory its vectors take.

    python benchmarks/window_cache.py TEXT [--tokens 6400000] [--windows 100,200]
        [--caches 50000,100000] [--output benchmarks/results/window_cache.md]

TEXT: a text file, one sentence or paragraph a line (`.xz` read as such); its first
--tokens whitespace tokens are read, as `spacy-elmo embed` splits lines. A line runs as
windows when it has more tokens than the window (blank lines count as lines). The cache is
a least-recently-used cache of words looked up token by token, as the biLM's word cache
keeps them; its memory is one float32 vector of the biLM's projection width a word (128 for
a small-shaped biLM, 512 for the original). Counts only, no timing.
"""

from __future__ import annotations

import argparse
import lzma
from collections import OrderedDict
from pathlib import Path
from typing import IO, List

WIDTHS = {"small-shaped": 128, "original": 512}  # the published biLMs' projection widths


def read_lines(path: Path, max_tokens: int) -> List[List[str]]:
    """The lines of `path` as whitespace tokens, up to the line that reaches max_tokens."""
    lines: List[List[str]] = []
    n = 0
    opened: IO[str] = (lzma.open(path, "rt", encoding="utf-8") if path.suffix == ".xz"
                       else open(path, encoding="utf-8"))
    with opened as f:
        for line in f:
            tokens = line.split()
            lines.append(tokens)
            n += len(tokens)
            if n >= max_tokens:
                break
    return lines


def hit_rate(lines: List[List[str]], size: int) -> float:
    """The share of token lookups a least-recently-used cache of `size` words answers."""
    cache: OrderedDict[str, None] = OrderedDict()
    hits = total = 0
    for tokens in lines:
        for token in tokens:
            total += 1
            if token in cache:
                hits += 1
                cache.move_to_end(token)
            else:
                cache[token] = None
                if len(cache) > size:
                    cache.popitem(last=False)
    return hits / max(total, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("text", type=Path)
    parser.add_argument("--tokens", type=int, default=6_400_000)
    parser.add_argument("--windows", default="100,200")
    parser.add_argument("--caches", default="50000,100000")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    lines = read_lines(args.text, args.tokens)
    n_tokens = sum(len(t) for t in lines)
    out = [f"# Windows and the word cache on {args.text.name}", "",
           f"- command: `python benchmarks/window_cache.py {args.text} --tokens "
           f"{args.tokens} --windows {args.windows} --caches {args.caches}`",
           f"- {n_tokens:,} tokens in {len(lines):,} lines", "",
           "| window | lines run as windows |", "|---|---|"]
    for window in (int(w) for w in args.windows.split(",")):
        longer = sum(len(t) > window for t in lines)
        out.append(f"| {window} | {100 * longer / len(lines):.1f}% |")
    out += ["", "| word cache | lookups answered | "
            + " | ".join(f"vectors, {name} biLM" for name in WIDTHS) + " |",
            "|---|---|" + "---|" * len(WIDTHS)]
    for size in (int(c) for c in args.caches.split(",")):
        memory = " | ".join(f"{size * width * 4 / 1e6:.0f} MB" for width in WIDTHS.values())
        out.append(f"| {size:,} | {100 * hit_rate(lines, size):.1f}% | {memory} |")
    text = "\n".join(out) + "\n"
    print(text, end="")
    if args.output is not None:
        args.output.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()

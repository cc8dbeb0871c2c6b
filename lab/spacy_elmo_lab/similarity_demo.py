"""The same word in different senses: ELMo vectors tell them apart, the token layer cannot.

  python -m spacy_elmo_lab.similarity_demo [PIPELINE_OR_WEIGHTS] [--lang en|zh]

PIPELINE_OR_WEIGHTS: a trained pipeline with an `elmo` component (its language decides), or
biLM weights (a directory or weights.hdf5); default: the biLM bundled for --lang. English:
"bank" (money, river); Chinese: the character 行 in 银行 (bank) and in 步行 (to walk), and
苹果 (the fruit, the company). A word of several tokens (苹果 is two characters to spaCy's
default `zh` tokenizer) is the mean of its tokens' vectors.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import spacy
import typer
from spacy.language import Language

from .messages import user_errors

# per language: words, each with (sense, sentence) pairs that hold it as a run of tokens
DEMOS: Dict[str, List[Tuple[str, List[Tuple[str, str]]]]] = {
    "en": [("bank", [
        ("money", "I deposited the money at the bank on Monday ."),
        ("money", "The bank raised its interest rates again ."),
        ("river", "We had a picnic on the grassy bank of the river ."),
        ("river", "The boat drifted towards the muddy bank ."),
    ])],
    "zh": [("行", [
        ("bank", "我在银行存了一笔钱。"),
        ("bank", "这家银行又提高了利率。"),
        ("walk", "我们一起步行去学校。"),
        ("walk", "他每天步行上班。"),
    ]), ("苹果", [
        ("fruit", "我每天早上吃一个苹果。"),
        ("fruit", "这些苹果又红又甜。"),
        ("company", "苹果公司发布了新款手机。"),
        ("company", "他在苹果做软件工程师。"),
    ])],
}


def find_word(tokens: List[str], word: str) -> Optional[Tuple[int, int]]:
    """The first run of tokens `[start, end)` whose texts joined without spaces are `word`."""
    for start in range(len(tokens)):
        joined = ""
        for end in range(start, len(tokens)):
            joined += tokens[end]
            if joined == word:
                return start, end + 1
            if not word.startswith(joined):
                break
    return None


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-12))


def preview(text: str, width: int = 32, word: Optional[str] = None) -> str:
    """The text, or the part of it around `word` (else its start) cut at word boundaries to
    about `width` characters, with "..." where it was cut (text without spaces, such as
    Chinese, is cut by characters)."""
    if len(text) <= width:
        return text
    spaced = " " in text
    units = text.split(" ") if spaced else list(text)
    joiner = " " if spaced else ""
    if word is not None and spaced and word in units:
        centre = units.index(word)
    elif word is not None and not spaced and word in text:
        centre = text.index(word)
    else:
        centre = 0
    start = end = centre
    grown = True
    while grown:  # grow the window a unit on each side in turn while it fits
        grown = False
        for side in (-1, 1):
            lo, hi = (start - 1, end) if side < 0 else (start, end + 1)
            if 0 <= lo and hi < len(units) and len(joiner.join(units[lo:hi + 1])) <= width:
                start, end, grown = lo, hi, True
    shown = joiner.join(units[start:end + 1])
    return ("..." if start > 0 else "") + shown + ("..." if end < len(units) - 1 else "")


def load(source: Optional[Path], lang: str) -> Language:
    """A trained pipeline with an `elmo` component (its language wins), or a blank `lang`
    pipeline with `elmo` over the weights at `source` (None: the bundled biLM)."""
    if source is not None and (source / "config.cfg").exists():
        return spacy.load(source)
    if lang not in DEMOS:
        raise typer.BadParameter(f"no demo sentences for {lang!r}; languages: {sorted(DEMOS)}")
    nlp = spacy.blank(lang)
    nlp.add_pipe("elmo", config={"weights": None if source is None else str(source)})
    return nlp


def main(source: Optional[Path] = typer.Argument(None),
         lang: str = typer.Option("en", help="en or zh (a pipeline's own language wins)")
         ) -> None:
    with user_errors():  # a missing or damaged biLM: its message, not a traceback
        compare_senses(load(source, lang))


def compare_senses(nlp: Language) -> None:
    """Print, for each demo word of the pipeline's language, the cosines of its vectors across
    its sentences, and whether each view separates the senses."""
    if nlp.lang not in DEMOS:
        raise typer.BadParameter(f"no demo sentences for {nlp.lang!r}; languages: "
                                 f"{sorted(DEMOS)}")
    elmo = nlp.get_pipe("elmo")
    elmo.cfg["store_layers"] = True  # type: ignore[attr-defined]
    separated = [compare_word(nlp, word, sentences) for word, sentences in DEMOS[nlp.lang]]
    if not all(separated):
        bundled = elmo.source.weights is None  # type: ignore[attr-defined]
        typer.echo(why_not_separated(bundled, nlp.lang))


def why_not_separated(bundled: bool, lang: str) -> str:
    """The line that says why a view answered "no", and what to try instead."""
    which = ("the small bundled biLM, pretrained on CPUs, does not separate these "
             "senses yet" if bundled else "this biLM does not separate these senses")
    fix = ("a published biLM, trained on a billion words, is the one to compare: "
           "python -m spacy_elmo_lab.similarity_demo allennlp/original (downloaded once)"
           if lang == "en" else "a larger biLM, e.g. an ELMoForManyLangs model directory: "
           "python -m spacy_elmo_lab.similarity_demo PATH --lang zh")
    return (f"A 'no' above: {which} (docs/models.md, 'Word senses'); {fix}. The token layer "
            "alone is the same vector in every sentence, so it can never separate them.")


def compare_word(nlp: Language, word: str, sentences: List[Tuple[str, str]]) -> bool:
    """Print the cosines of `word` across `sentences` and each view's verdict; whether every
    contextual view (the mix, each LSTM layer) separates the senses."""
    vecs, layers = [], []
    for _, text in sentences:
        doc = nlp(text)
        tokens = [t.text for t in doc]
        found = find_word(tokens, word)
        if found is None:
            raise typer.BadParameter(f"{word!r} is not a run of tokens of {text!r} ({tokens}): "
                                     "the demo needs the pipeline's default tokenizer")
        start, end = found
        vecs.append(doc._.elmo[start:end].mean(0))
        layers.append(doc._.elmo_layers[:, start:end].mean(1))
    tokens_only = [v[0] for v in layers]
    typer.echo(f"cosine similarity of {word!r} (ELMo mix | token layer only):")
    for a in range(len(sentences)):
        for b in range(a + 1, len(sentences)):
            same = "same sense " if sentences[a][0] == sentences[b][0] else "other sense"
            typer.echo(f"  {same}  {_cos(vecs[a], vecs[b]):.3f} | "
                       f"{_cos(tokens_only[a], tokens_only[b]):.3f}"
                       f"   {preview(sentences[a][1], word=word)!r} ~ "
                       f"{preview(sentences[b][1], word=word)!r}")
    typer.echo("every same-sense pair closer than every other-sense pair?")
    views = [("ELMo mix", vecs)] + [(f"layer {k}", [v[k] for v in layers])
                                    for k in range(len(layers[0]))]
    senses = [sense for sense, _ in sentences]
    verdicts = []
    for name, vectors in views:
        same_min, other_max = separation(vectors, senses)
        verdicts.append(same_min > other_max)
        typer.echo(f"  {name}: {'yes' if verdicts[-1] else 'no'} (closest other-sense pair "
                   f"{other_max:.3f}, farthest same-sense pair {same_min:.3f})")
    return all(verdicts[:1] + verdicts[2:])  # the mix and the LSTM layers (not layer 0)


def separation(vectors: List[np.ndarray], senses: List[str]) -> Tuple[float, float]:
    """(lowest same-sense cosine, highest other-sense cosine) over the pairs of vectors,
    `senses[i]` the sense of `vectors[i]`."""
    same: List[float] = []
    other: List[float] = []
    for a in range(len(vectors)):
        for b in range(a + 1, len(vectors)):
            cos = _cos(vectors[a], vectors[b])
            (same if senses[a] == senses[b] else other).append(cos)
    return min(same), max(other)


if __name__ == "__main__":
    typer.run(main)

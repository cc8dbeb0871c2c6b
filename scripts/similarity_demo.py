"""The same word in different senses: ELMo vectors tell them apart, the token layer cannot.

  python scripts/similarity_demo.py [PIPELINE_OR_WEIGHTS]

PIPELINE_OR_WEIGHTS: a trained pipeline with an `elmo` component, or biLM weights (a
directory or weights.hdf5); default: the bundled English biLM.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Tuple

import numpy as np
import spacy
import typer

SENTENCES = [
    ("money", "I deposited the money at the bank on Monday ."),
    ("money", "The bank raised its interest rates again ."),
    ("river", "We had a picnic on the grassy bank of the river ."),
    ("river", "The boat drifted towards the muddy bank ."),
]


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-12))


def main(source: Optional[Path] = typer.Argument(None)) -> None:
    if source is not None and (source / "config.cfg").exists():
        nlp = spacy.load(source)
    else:
        nlp = spacy.blank("en")
        nlp.add_pipe("elmo", config={"weights": None if source is None else str(source)})
    elmo = nlp.get_pipe("elmo")
    elmo.cfg["store_layers"] = True
    vecs, layers = [], []
    for _, text in SENTENCES:
        doc = nlp(text)
        i = [t.text for t in doc].index("bank")
        vecs.append(doc._.elmo[i])
        layers.append(doc._.elmo_layers[:, i])
    tokens = [v[0] for v in layers]
    typer.echo("cosine similarity of 'bank' (ELMo mix | token layer only):")
    for a in range(len(SENTENCES)):
        for b in range(a + 1, len(SENTENCES)):
            same = "same sense " if SENTENCES[a][0] == SENTENCES[b][0] else "other sense"
            typer.echo(f"  {same}  {_cos(vecs[a], vecs[b]):.3f} | {_cos(tokens[a], tokens[b]):.3f}"
                       f"   {SENTENCES[a][1][:32]!r} ~ {SENTENCES[b][1][:32]!r}")
    typer.echo("every same-sense pair closer than every other-sense pair?")
    views = [("ELMo mix", vecs)] + [(f"layer {k}", [v[k] for v in layers])
                                    for k in range(len(layers[0]))]
    for name, vectors in views:
        same_min, other_max = separation(vectors)
        verdict = "yes" if same_min > other_max else "no"
        typer.echo(f"  {name}: {verdict} (closest other-sense pair {other_max:.3f}, "
                   f"farthest same-sense pair {same_min:.3f})")


def separation(vectors: List[np.ndarray]) -> Tuple[float, float]:
    """(lowest same-sense cosine, highest other-sense cosine) over the sentence pairs."""
    same, other = [], []
    for a in range(len(SENTENCES)):
        for b in range(a + 1, len(SENTENCES)):
            cos = _cos(vectors[a], vectors[b])
            (same if SENTENCES[a][0] == SENTENCES[b][0] else other).append(cos)
    return min(same), max(other)


if __name__ == "__main__":
    typer.run(main)

"""Tiny random models and toy data: what the tests and the GPU check build in seconds (no
download, no training)."""

from __future__ import annotations

import random
from typing import List, Union

import torch
from spacy.language import Language
from spacy.tokens import Doc, Span

from spacy_elmo.bilm import BiLM, BiLMOptions

TINY_OPTIONS = BiLMOptions(lstm_dim=12, projection_dim=6, n_layers=2, char_embed_dim=4,
                           filters=((1, 4), (2, 4), (3, 8)), n_highway=1)


def make_random_bilm(options: BiLMOptions = TINY_OPTIONS, seed: int = 0) -> BiLM:
    """A biLM of random weights (biases too, so that weight layouts are really tested)."""
    torch.manual_seed(seed)
    bilm = BiLM(options)
    with torch.no_grad():
        for p in bilm.parameters():
            p.add_(torch.randn_like(p) * 0.1)
        bilm.encoder.char_embedding.weight[0].zero_()
    return bilm.eval()


def toy_docs(nlp: Language, n: int, seed: int = 0) -> List[Doc]:
    """`n` one-sentence docs with two entities (PER, LOC) and a label their city decides
    (SOUTH or NORTH): NER and textcat a model can learn in a few steps."""
    rng = random.Random(seed)
    names = ["Alice", "Bob", "Carol", "Dave"]
    cities = ["Paris", "London", "Berlin", "Rome"]
    docs = []
    for _ in range(n):
        city = rng.choice(cities)
        words = [rng.choice(names), "went", "to", city, "today", "."]
        starts: List[Union[bool, int, None]] = [i == 0 for i in range(len(words))]
        doc = Doc(nlp.vocab, words=words, sent_starts=starts)
        doc.ents = [Span(doc, 0, 1, "PER"), Span(doc, 3, 4, "LOC")]
        south = city in ("Paris", "Rome")
        doc.cats = {"SOUTH": float(south), "NORTH": float(not south)}
        docs.append(doc)
    return docs

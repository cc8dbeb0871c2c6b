"""One windowing and batching engine (bilm/windows.py) for the embedder and the component."""

import numpy as np
import pytest
import spacy
from spacy.tokens import Doc

from spacy_elmo.bilm import load_bilm
from spacy_elmo.bilm.embedder import Embedder
from spacy_elmo.bilm.windows import batches, split

WORDS = [f"w{i}" for i in range(23)]


@pytest.mark.parametrize("n,size,context", [(0, 5, 1), (5, 5, 2), (23, 5, 2), (23, 7, 0)])
def test_split_keeps_every_position_once_with_context(n, size, context):
    targets = np.arange(100, 100 + n)
    pieces = split(3, WORDS[:n], targets, size, context)
    kept = np.concatenate([p.targets for p in pieces])
    np.testing.assert_array_equal(kept, targets)
    for p in pieces:
        assert p.source == 3 and len(p.words) <= size + 2 * context
        assert list(p.words[p.start : p.end]) == [WORDS[t - 100] for t in p.targets]
    if n > size:  # inner windows see context on both sides
        assert pieces[1].start == context and len(pieces[1].words) - pieces[1].end == context


def test_batches_are_longest_first_and_bounded_in_rows_and_tokens():
    pieces = [p for i, n in enumerate([3, 9, 3, 1, 30, 9])
              for p in split(i, WORDS[:1] * n, np.arange(n), 100)]
    result = batches(pieces, batch_size=2, max_batch_tokens=25)
    assert [[p.source for p in batch] for batch in result] == [[4], [1, 5], [0, 2], [3]]
    for batch in result[1:]:
        assert len(batch) * (len(batch[0].words) + 2) <= 25


def test_component_and_embedder_give_the_same_windowed_vectors(tiny_weights_dir):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"weights": str(tiny_weights_dir), "store_layers": True,
                                 "model": {"max_sentence_tokens": 8}})
    doc = nlp(Doc(nlp.vocab, words=WORDS))  # no sentence boundaries: windows of 8
    (expected,) = Embedder(load_bilm(tiny_weights_dir), window=8).embed([WORDS])
    np.testing.assert_allclose(doc._.elmo_layers, expected, atol=1e-6)

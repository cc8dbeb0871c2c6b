"""How much a sentence's vectors depend on the rest of its batch (deterministic mode).

Every sentence starts from a zero state, so the only dependence left is floating-point
rounding: the batch's shape (rows, padded length) changes how the matrix products are
blocked and summed. This runs one sentence alone and in batches of other sentences, and
prints the largest absolute difference of each layer, for the bundled biLM and for a random
3-layer biLM with larger weights (closer to a published model's scale).

    python benchmarks/batch_dependence.py [--threads 1] [--batches 20] [--float64]
"""

from __future__ import annotations

import argparse
import random

import numpy as np
import torch

from spacy_elmo.bilm import BiLM, BiLMOptions, batch_to_ids, load_bilm

WORDS = ("the bank raised rates and we sat on the river bank while a small boat went by "
         "under old trees near the town hall").split()


def random_bilm(scale: float, seed: int = 0) -> BiLM:
    """3 LSTM layers of 1024/256; every parameter drawn with standard deviation `scale`."""
    torch.manual_seed(seed)
    options = BiLMOptions(lstm_dim=1024, projection_dim=256, n_layers=3, n_highway=1,
                          filters=((1, 32), (2, 32), (3, 64), (4, 128), (5, 256)))
    bilm = BiLM(options)
    with torch.no_grad():
        for p in bilm.parameters():
            p.copy_(torch.randn_like(p) * scale)
    return bilm.eval()


def largest_differences(bilm: BiLM, n_batches: int = 20, seed: int = 0) -> np.ndarray:
    """Per layer, the largest |difference| of one sentence's vectors between running it alone
    and running it in `n_batches` random batches (2-64 rows, sentences of 1-60 tokens)."""
    rng = random.Random(seed)
    sentence = WORDS[:12]
    with torch.no_grad():
        alone = bilm(batch_to_ids([sentence])).layers[:, 0].numpy()
        worst = np.zeros(alone.shape[0])
        for _ in range(n_batches):
            others = [[rng.choice(WORDS) for _ in range(rng.randint(1, 60))]
                      for _ in range(rng.randint(1, 63))]
            row = rng.randint(0, len(others))
            batch = others[:row] + [sentence] + others[row:]
            layers = bilm(batch_to_ids(batch)).layers[:, row, : len(sentence)].numpy()
            worst = np.maximum(worst, np.abs(layers - alone).max(axis=(1, 2)))
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--float64", action="store_true",
                        help="run in float64: what is left is not float32 rounding")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    models = {"bundled (2 layers, 512/128)": load_bilm(None)}
    for scale in (0.1, 0.3):
        models[f"random 3 layers 1024/256, weights sd {scale}"] = random_bilm(scale)
    for name, bilm in models.items():
        worst = largest_differences(bilm.double() if args.float64 else bilm, args.batches)
        layers = ", ".join(f"{w:.1e}" for w in worst)
        print(f"{name}: largest |difference| per layer (token, LSTM 1..L): {layers}")


if __name__ == "__main__":
    main()

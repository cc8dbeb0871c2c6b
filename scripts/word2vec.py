"""Static word vectors (gensim word2vec) on the biLM's pretraining text, tokenized alike.

The logic: lab/spacy_elmo_lab/word2vec.py; `--help` for the usage."""

import typer
from spacy_elmo_lab.word2vec import main

if __name__ == "__main__":
    typer.run(main)

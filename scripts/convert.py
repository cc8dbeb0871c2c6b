"""Convert labelled datasets to spaCy's `.spacy` format: `ner`, `textcat` and `conllu`
subcommands (the logic: spacy_elmo/experiments/convert.py; `--help` for the usage)."""

from spacy_elmo.experiments.convert import app

if __name__ == "__main__":
    app()

"""Convert labelled datasets to spaCy's `.spacy` format: `ner`, `textcat` and `conllu`
subcommands (the logic: lab/spacy_elmo_lab/convert.py; `--help` for the usage)."""

from spacy_elmo_lab.convert import app

if __name__ == "__main__":
    app()

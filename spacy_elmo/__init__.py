"""spacy-elmo: ELMo contextual vectors for spaCy v3."""

__version__ = "0.1.0"

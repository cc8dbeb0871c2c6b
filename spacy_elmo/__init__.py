"""spacy-elmo: ELMo contextual vectors for spaCy v3."""

__version__ = "1.1.0"

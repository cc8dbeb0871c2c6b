"""spacy-elmo: ELMo contextual vectors for spaCy v3."""

__version__ = "1.0.0"

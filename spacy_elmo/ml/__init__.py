"""spaCy's architectures and thinc layers around the pure-PyTorch biLM (as spaCy's
`ml/models/`): the ElmoModel that runs it, the listener and the private-biLM tok2vec, the
task's layer mix and encoders. The `elmo` component that runs them is in `pipeline/`."""

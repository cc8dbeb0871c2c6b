"""The spacy-elmo project's lab: results-table cells and their configs, scoring and reports,
dataset conversions, word2vec baselines, the WiC and layer probes, bundling biLMs. Its
command lines are its modules (`python -m spacy_elmo_lab.MODULE --help`), which project.yml
and the benchmarks run. It imports the library (`spacy_elmo`); the library never imports it,
and its wheel leaves it out."""

import os

# before torch starts its thread pool (a command runs as `python -m spacy_elmo_lab.MODULE`,
# which imports this first), as the spacy-elmo command line does
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "1.1.0"

"""The spacy-elmo project's lab: results-table cells and their configs, scoring and reports,
dataset conversions, word2vec baselines, the WiC and layer probes, bundling biLMs. The thin
CLIs in scripts/ and the benchmarks call these modules. It imports the library (`spacy_elmo`);
the library never imports it, and its wheel leaves it out."""

__version__ = "1.1.0"

"""The project's experiments: results-table cells and their configs, scoring and reports,
dataset conversions, word2vec baselines, the WiC probe, bundling biLMs. The thin CLIs in
scripts/ call these modules. Imports the pipeline, pretraining and biLM packages, never the
CLI; nothing outside this package imports it."""

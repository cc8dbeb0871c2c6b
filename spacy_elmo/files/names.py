"""The names of the files spacy-elmo reads and writes, each spelled here only: those of a
biLM, an export, a pretraining run, an ELMoForManyLangs model and a saved spaCy pipeline."""

# a biLM in the published (bilm-tf, AllenNLP) layout
WEIGHTS_NAME = "weights.hdf5"
OPTIONS_NAME = "options.json"
# AllenNLP's naming of a published biLM's two files: <stem>_weights.hdf5, <stem>_options.json
PUBLISHED_WEIGHTS_SUFFIX = "_weights.hdf5"
PUBLISHED_OPTIONS_SUFFIX = "_options.json"

# an export (`spacy-elmo export`, RUN/model, a snapshot): the biLM's two, with the language
# model's vocabulary and softmax beside them
VOCAB_NAME = "vocab.txt"
SOFTMAX_NAME = "softmax.hdf5"
EXPORT_FILES = (OPTIONS_NAME, WEIGHTS_NAME, VOCAB_NAME, SOFTMAX_NAME)

# a pretraining run directory (RUN/vocab.txt, too)
CHECKPOINT_NAME = "checkpoint.pt"
CONFIG_NAME = "config.json"  # the run's record of its settings
METRICS_NAME = "metrics.jsonl"
CURVES_NAME = "curves.png"
LOCK_NAME = ".lock"  # files.lock.DirectoryLock's
MODEL_DIR = "model"  # the export of the run's end
SNAPSHOT_DIR = "snapshots"  # snapshots/step_NNNNNNN/: an export and its SNAPSHOT_INFO
SNAPSHOT_PREFIX = "step_"
SNAPSHOT_INFO = "dev.json"
RUN_FILES = (CHECKPOINT_NAME, CONFIG_NAME, METRICS_NAME, CURVES_NAME, VOCAB_NAME)
RUN_DIRS = (MODEL_DIR, SNAPSHOT_DIR)

# an ELMoForManyLangs model directory
EFML_CONFIG = "config.json"
EFML_CHAR_DIC = "char.dic"
EFML_WORD_DIC = "word.dic"
EFML_TOKEN_EMBEDDER = "token_embedder.pkl"
EFML_ENCODER = "encoder.pkl"
EFML_FILES = (EFML_CONFIG, EFML_CHAR_DIC, EFML_WORD_DIC, EFML_TOKEN_EMBEDDER, EFML_ENCODER)

# a saved spaCy pipeline (spaCy's names)
PIPELINE_CONFIG = "config.cfg"
PIPELINE_META = "meta.json"

"""One catalogue of the error and warning messages spacy-elmo raises, with codes.

Reading a message from `Errors` or `Warnings` gives it with its code in front, as spaCy
does: `Errors.E001` is "[E001] No such file: ...". Codes are grouped in sections, in order.
"""

from __future__ import annotations

import re
import warnings
from typing import Optional, Type

CODE = re.compile(r"[EW]\d{3}")


class ElmoError(ValueError):
    """A problem the user can fix: the message names it and says how."""


def first_line(err: BaseException) -> str:
    """The first line of an exception's message (its type's name when it has none): the gist
    of another library's error, to quote in a message of the catalogue."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


class ElmoWarning(UserWarning):
    """A spacy-elmo warning (see `warn`)."""


def warn(message: str, *, stacklevel: int = 1) -> None:
    """Warn with a message of the catalogue: a real Python warning (category ElmoWarning,
    filterable, seen by pytest.warns), printed as its message alone, without the source
    line. stacklevel counts from the caller, as `warnings.warn`'s does."""
    _show_message_alone()
    warnings.warn(message, ElmoWarning, stacklevel=stacklevel + 1)


_FORMAT_INSTALLED = False


def _show_message_alone() -> None:
    """Make `warnings.formatwarning` print ElmoWarnings as their message alone (once;
    other warnings are formatted as before)."""
    global _FORMAT_INSTALLED
    if _FORMAT_INSTALLED:
        return
    _FORMAT_INSTALLED = True
    previous = warnings.formatwarning

    def formatwarning(message: Warning | str, category: Type[Warning], filename: str,
                      lineno: int, line: Optional[str] = None) -> str:
        if issubclass(category, ElmoWarning):
            return f"{message}\n"
        return previous(message, category, filename, lineno, line)

    warnings.formatwarning = formatwarning


def damaged(path: object, kind: str, err: object) -> ElmoError:
    """Errors.E002 for a file (or bytes) that cannot be read as `kind`, with what went wrong
    (an exception's first line, or a text): the one way damage is reported."""
    detail = first_line(err) if isinstance(err, BaseException) else str(err)
    return ElmoError(Errors.E002.format(path=path, kind=kind, err=detail.rstrip(".")))


class Catalogue(type):
    """Reading a code (`E001`, `W002`) from a class made with this metaclass gives its message
    prefixed with the code in brackets; every other attribute reads as usual."""

    def __getattribute__(cls, name: str) -> str:
        value = super().__getattribute__(name)
        if CODE.fullmatch(name) and isinstance(value, str):
            return f"[{name}] {value}"
        return value


class Errors(metaclass=Catalogue):
    # Files and formats (E001-E009)
    E001 = "No such file: '{path}'. Check the path (it is resolved relative to '{cwd}')."
    E002 = ("Could not read '{path}' as {kind}: {err}. The file may be truncated or of another "
            "format; download or export it again.")
    E003 = ("'{path}' has no dataset '{name}': it is not a bilm-tf/AllenNLP ELMo weights file "
            "(expected datasets such as 'char_embed', 'CNN/W_cnn_0', 'RNN_0/...'). {hint}")
    E004 = ("Weights do not match the options: dataset '{name}' in '{path}' has shape {found}, "
            "but the options ask for {expected}. Use the options.json that came with these "
            "weights.")
    E005 = ("Options file '{path}' is missing the key '{key}'. An ELMo options.json has 'lstm' "
            "{{dim, projection_dim, n_layers, cell_clip, proj_clip, use_skip_connections}} and "
            "'char_cnn' {{activation, embedding{{dim}}, filters, max_characters_per_token, "
            "n_characters, n_highway}}.")
    E006 = ("Options: 'char_cnn.n_characters' is {value}; ELMo models use 262 (inference "
            "layout, id 0 = padding) or 261 (bilm-tf training layout). Both load the same "
            "261-row 'char_embed'; any other value means the options belong to another model.")
    E007 = "Options: {key} must be {what}, got {value}.{fix}"
    E008 = ("'{path}' is a directory but holds no '{name}'. Pass the file itself, or a directory "
            "with both 'options.json' and 'weights.hdf5'.")
    E009 = "Cannot write '{path}': {err}."
    # Inputs and devices (E010-E019)
    E010 = ("Line {line} of '{path}' is not valid UTF-8 ({err}). Re-encode the file as UTF-8, "
            "e.g. `iconv -f latin1 -t utf-8`.")
    E011 = ("'{path}' holds {what} that the options do not use ({names}): the options "
            "describe a smaller model than these weights, and loading would silently drop "
            "parts of it. Use the options.json written with these weights.")
    E012 = "Unknown value {value!r} for {name}; choose one of {choices}."
    E013 = ("Character ids must be a (batch, tokens, {n_chars}) integer tensor; got shape "
            "{shape} and dtype {dtype}.")
    E014 = ("Stateful mode needs at most {max_rows} rows per batch (the state was made for that "
            "many); got {rows}. Call reset_state() or create the runner with more rows.")
    E015 = ("--gpu-id {gpu_id} was given, but torch sees no CUDA device. Drop --gpu-id to run "
            "on CPU.")
    E016 = ("No options file for the weights '{weights}' (looked for {tried}). Pass the "
            "options.json that came with the weights (`options` in the component config, "
            "--options on the command line).")
    # Settings, and files of the embed command (E020-E029)
    E020 = "{key} must be {what}, got {value}.{fix}"
    E021 = ("Line {line} has {n} tokens, more than the {limit} that stateful mode runs in one "
            "piece (it feeds whole lines, as the reference does). Drop --stateful to run long "
            "lines in overlapping windows, raise --window, or split the line.")
    E022 = "Cannot read '{path}': it is a directory or not readable. Pass a readable text file."
    E023 = ("--gpu-id {gpu_id} was given, but torch sees only {count} CUDA device(s) "
            "(ids 0..{last}).")
    E024 = ("Cannot write '{path}': the disk is full ({err}; {free} free in '{directory}'). "
            "Nothing was replaced and the partial file was removed. Free some space there, "
            "or write elsewhere, and run again.")
    E025 = ("'{output}' is, or lies inside, one of this command's inputs ('{input}'): writing "
            "there could destroy it. Choose another output path.")
    E026 = ("OUTPUT '{output}' already exists. Pass --overwrite to replace it, or choose "
            "another OUTPUT.")
    E027 = "Unknown key(s) {keys} in {where}; known keys: {known}."
    E028 = ("'{path}' is a file, but a directory is needed here ({what}). Choose a directory "
            "path (it is created if missing).")
    E029 = "Stopped by {signal}: nothing was written to '{output}'."
    # ELMoForManyLangs (EFML) model directories (E030-E044)
    E030 = ("'{path}' is neither a bilm-tf/AllenNLP model directory (options.json + "
            "weights.hdf5) nor an ELMoForManyLangs one (config.json, char.dic, word.dic, "
            "token_embedder.pkl, encoder.pkl). Pass a weights.hdf5 file or a directory holding "
            "one of these sets.")
    E031 = ("'{path}' has no '{name}' ({what}). An ELMoForManyLangs model directory holds "
            "config.json, the network config it names, char.dic, word.dic (unless word_dim is "
            "0), token_embedder.pkl and encoder.pkl: unzip the whole downloaded model into one "
            "directory.")
    E032 = ("'{config}' names the network config {name!r}, which is not there (looked for "
            "{tried}). Copy it from ELMoForManyLangs' configs/ folder into the model "
            "directory, or pass it as the options ('options' in the component config, "
            "--options on the command line).")
    E033 = ("ELMoForManyLangs network config '{path}': '{key}' must be {what}, got {value!r}.")
    E034 = ("Line {line} of '{path}' is not '<entry> TAB <id>': {text!r}. Use the dictionary "
            "that came with the model.")
    E035 = ("The {kind} dictionary ({source}) lacks the required entries {missing}. Use the "
            "dictionary that came with the model.")
    E036 = ("The ids in '{path}' must be 0..N-1, one per entry, as the embedding rows are; "
            "{detail}. Use the dictionary that came with the model.")
    E037 = ("The biLM options ask for {options}, but the dictionary has {dictionary}. Load "
            "the model together with the dictionaries it was saved with.")
    E038 = ("Could not load '{path}' as a PyTorch state dict: {err}. It is read with "
            "torch.load(weights_only=True), which never runs code from the file; a file that "
            "needs code, is truncated or is not a PyTorch file fails. Use the file that came "
            "with the model.")
    E039 = ("'{path}' is not the {part} state dict of the ELMoForManyLangs model that the "
            "network config {source} describes: {detail}.")
    E040 = ("'{name}' in '{path}' has shape {found}, but {source} ask for {expected}. The "
            "pickles, dictionaries and network config must come from the same model.")
    E041 = ("This biLM reads dictionary characters (an ELMoForManyLangs model), which the "
            "bilm-tf/AllenNLP weights layout cannot hold.")
    E042 = ("--init-weights '{path}' is an ELMoForManyLangs model: pretraining does not "
            "continue from those yet (its export is the bilm-tf layout). Use the model in "
            "spaCy or with `spacy-elmo embed`, or start from a bilm-tf/AllenNLP biLM.")
    E043 = ("Sentence(s) {missing} are in none of the batches to replay. Pass batches that "
            "hold every sentence once, e.g. from efml_batch_order.")
    E044 = ("The {kind} dictionary ({source}) lists {n} entries but only {distinct} distinct "
            "ones: each entry must appear once. Use the dictionary that came with the model.")
    # Runs and weights that are no biLM yet, or no longer one (E045-E049)
    E045 = ("'{path}' is {what} of `spacy-elmo pretrain`, not a biLM. Export the run first: "
            "`spacy-elmo export {run} OUT`, then give OUT as the weights{finished}.")
    E046 = ("'{path}' holds {n:,} non-finite value(s) (NaN or infinity) in "
            "'{name}'{more}: the file is damaged, or was written by a run that diverged. "
            "Download or export the weights again (from a pretraining run: an earlier "
            "checkpoint or snapshot).")
    # spaCy pipeline (E050-E059)
    E050 = ("The ELMo model has no biLM weights yet. Call `nlp.initialize()`, or give the "
            "`elmo` component a 'weights' path (a weights.hdf5 file or a directory with "
            "options.json + weights.hdf5).")
    E051 = ("This doc has {n} tokens but ELMo vectors for {n_vectors}: it was retokenized "
            "(tokens merged or split) after the `elmo` component ran, so the vectors no longer "
            "line up with the tokens. Put merge_entities, merge_noun_chunks and other "
            "retokenizing components before `elmo` in the pipeline.")
    E052 = ("An ELMo listener received a batch it was not prepared for (got {got}, expected "
            "{expected}): its task is training on other docs than the `elmo` component ran "
            "on in this update. Give every component of the update the same examples.")
    E053 = ("ELMo listener (upstream = {upstream!r}): the upstream ELMo width is not known "
            "yet: no {which} before this one in the pipeline, or it is not initialized. Name "
            "an `elmo` component placed earlier in the pipeline as `upstream` (\"*\": any) "
            "and call nlp.initialize() (it initializes in pipeline order), or use "
            "`spacy-elmo.ElmoTok2Vec.v2` for a private biLM.")
    E054 = ("The task's layer mix was trained on ELMo vectors of width {expected}, but the "
            "biLM now gives width {found}: the `elmo` component's weights were changed after "
            "this task was trained. Use the biLM the pipeline was trained with, or train the "
            "task again.")
    E055 = ("This doc has no ELMo vectors (doc._.elmo is None): run the `elmo` component on "
            "it, or restore it from a DocBin saved with store_user_data=True.")
    E056 = ("An ELMo listener is being trained on docs without ELMo layers: the `elmo` "
            "component took no part in this update. It is probably listed in [training] "
            "frozen_components: remove it from there (with grad_factor 0, the default, the "
            "biLM stays frozen anyway), or also list it in [training] annotating_components "
            "so that it annotates the docs its listeners train on. (`nlp.rehearse` is not "
            "supported with ELMo listeners: the `elmo` component does not rehearse.)")
    E057 = ("{where}: {what}, but `width` is not set. The encoder runs on vectors of `width` "
            "(and ELMo at the output goes beside the encoder's): set width to the encoder's "
            "width, or encode = null and elmo_at_output = false for the mixed ELMo vectors as "
            "they are.")
    E058 = ("[components.{name}] mix_weights has {n} number(s), but this biLM has "
            "{n_layers} layers (the token layer and one per LSTM layer). Give one weight per "
            "layer, or null for equal weights.")
    E059 = ("The layer mix was built for {expected} biLM layers but got {found}: the `elmo` "
            "component's weights (or the private biLM) changed after the task was trained. "
            "Use the biLM the pipeline was trained with, or train the task again.")
    # Weights by name, URL or language (E060-E069)
    E060 = ("Could not download '{url}' into the cache ('{path}'): {err}. Check the address "
            "and the network, or download the file yourself and pass its local path.")
    E061 = ("'{name}' is neither a local file or directory nor a published biLM; the "
            "published ones are {names}. Otherwise pass a weights.hdf5 file, a directory, an "
            "ELMoForManyLangs model directory or an http(s):// or file:// URL.")
    E062 = ("The download of '{url}' stopped after {got} of {expected} bytes; nothing was "
            "kept in the cache ('{path}'). Run again to download it again.")
    E063 = ("'{url}' did not give {kind} (it starts with {head!r}); the server may have sent "
            "an error page. Nothing was kept in the cache ('{path}'). Check the address "
            "(published biLMs are downloaded from $SPACY_ELMO_URL_PREFIX when it is set).")
    E064 = ("No biLM is bundled for the language {lang!r} (bundled: {languages}), so {give}. "
            "It takes a weights.hdf5 file, a directory with "
            "options.json + weights.hdf5, an ELMoForManyLangs model directory (such as their "
            "Chinese model), an http(s):// or file:// URL, or a published English biLM such "
            "as 'allennlp/original'.")
    E065 = ("The biLM bundled for {lang!r} is not installed: '{path}' has no weights.hdf5. "
            "Reinstall spacy-elmo, or give `weights`.")
    E066 = ("No options for the weights '{weights}': '{url}' beside it could not be fetched "
            "({err}). Pass the options.json that came with the weights (`options` in the "
            "component config, --options on the command line).")
    E067 = ("'{url}' was downloaded completely but is not {kind} ({err}); nothing was kept in "
            "the cache ('{path}'). Fix the file at that address (or give another), then run "
            "again.")
    # Outputs and run locks (E070-E079)
    E070 = ("'-' (standard output) is not supported for {what}: give a file name.")
    E071 = ("'{path}' is in use by another writer ({holder}), which holds its lock "
            "'{lock}': two writers would mix their files. Wait until it ends (or stop it), "
            "or choose another directory. Reading it (info, perplexity, export into another "
            "directory) works meanwhile.")
    E072 = ("'{path}' holds files that are not a model export's ({names}); an export "
            "replaces the whole directory. Choose a new or empty directory, or move them "
            "out first.")
    E073 = ("'{output}' lies inside {what} '{where}': writing there could destroy it (only "
            "`spacy-elmo pretrain` and `export` write into a run, under its lock). Choose a "
            "path outside it.")
    # Experiments and configs (E090-E099)
    E090 = ("The config switches static vectors on ({layers}: include_static_vectors = true) "
            "but gives no vectors to load ([initialize] vectors is null). Pass a spaCy "
            "pipeline that holds them, e.g. --paths.vectors vectors/w2v_all/nlp (made by "
            "`spacy init vectors`), or set include_static_vectors to false.")
    # Pretraining (E100-E149)
    E100 = ("No corpus files match {pattern!r} (resolved relative to '{cwd}'). Pass text files, "
            "globs or directories of .txt/.gz/.xz files.")
    E101 = ("The corpus {paths} holds no usable text{detail}. Check the files are UTF-8 text "
            "with one sentence or paragraph per line.")
    E102 = ("The vocabulary has {n_vocab} entries, but the sampled softmax draws {n_negatives} "
            "negatives from it. Lower 'n_negatives' below {n_vocab} or use a larger corpus.")
    E103 = ("The dev file(s) {paths} contain no in-vocabulary words ({n_tokens} tokens, all "
            "<UNK>), so perplexity would be meaningless. Use dev text in the training language.")
    E104 = ("The options given ({key} = {given!r}) do not match the --init-weights model "
            "({key} = {found!r}). Drop the size options, or use the options.json of the weights.")
    E105 = ("Cannot resume: the run in '{path}' was made with {key} = {found!r}, but this "
            "command asks for {given!r}. Use the run's settings, or start a new output directory.")
    E106 = ("The output directory '{path}' already holds a {what}. Pass --resume to continue "
            "it, --overwrite to replace it, or choose another directory.")
    E107 = "--resume was given, but '{path}' holds no checkpoint ('{name}'). Drop --resume."
    E108 = ("'{path}' is not a pretraining checkpoint ({err}). Pass the run directory or its "
            "'checkpoint.pt'.")
    E109 = ("Could not write the checkpoint '{path}': {err}. The previous checkpoint is left "
            "intact.")
    E110 = ("The checkpoint was written by {found} process(es), but this run has {given}. "
            "Resume with the same number of processes (torchrun --nproc_per_node {found}).")
    E111 = "Pretraining config '{path}' has unknown key(s) {keys}; known keys: {known}."
    E112 = "Pretraining setting {key} must be {what}, got {value}.{fix}"
    E113 = ("No training corpus was given. Pass text files (spacy-elmo pretrain CONFIG "
            "TEXT...), or set train in the config's [paths] section (--paths.train).")
    E114 = ("spaCy has no language {lang!r} for tokenization ({err}). Use a spaCy language "
            "code such as 'en' or 'zh', or 'whitespace' for pre-tokenized text.")
    E115 = ("'{path}' has no {missing}. The language model's softmax and vocabulary go "
            "together: `spacy-elmo export` writes both beside options.json + weights.hdf5, "
            "and perplexity needs them. Published biLMs ship neither (`pretrain "
            "--init-weights` then starts a softmax from the token encoder). Export the run "
            "(or a snapshot of it) again.")
    E116 = ("The softmax in '{path}' has shape {found}, but the vocabulary ({n_vocab} words) "
            "and the biLM's projection_dim ({dim}) need {expected}. The files come from "
            "different exports; export the run again.")
    E117 = ("Cannot use the segmenter {segmenter!r} with lang {lang!r}: {err}. The "
            "segmenter is for Chinese ('--lang zh'): 'char' (default, no extra package) or "
            "'jieba' (pip install jieba). For pkuseg or any other segmenter, segment the text "
            "beforehand (spaces between words) and use '--lang whitespace'.")
    E118 = ("--options {text!r} is not a JSON object of option overrides ({err}). Write e.g. "
            "--options '{{\"lstm_dim\": 512, \"n_highway\": 1}}' (keys as in the presets).")
    E119 = ("The checkpoint '{path}' is damaged: its content does not match the checksum "
            "written with it, so training from it would continue from wrong weights or data. "
            "Resume from a copy of the run (or an earlier checkpoint), or start again.")
    E120 = ("Stopped by {signal} outside the training loop; files already written are "
            "intact (continue with --resume if the run has a checkpoint).")
    E121 = ("--resume and --overwrite contradict each other: --resume continues the run "
            "in '{path}', --overwrite replaces it. Give one of them.")
    E122 = ("The output directory '{path}' holds files that are not a pretraining run's "
            "({names}); a run would mix its files with them or replace some of them. Choose an "
            "empty or new directory.")
    E123 = ("The {what} '{input}' lies inside the run directory '{path}', where a new run "
            "replaces '{name}' before it starts. Move it out of the run directory first.")
    E124 = ("The vocabulary '{path}' lists {word!r} more than once (lines {first} and "
            "{second}). Give each word once.")
    E125 = ("'{path}' could not be read as a pretraining checkpoint: it is damaged ({err}). "
            "Resume from a copy of the run, or from its last snapshot with --init-weights.")
    E126 = ("The pretraining device {device!r} needs CUDA device {index}, but torch sees "
            "{count} CUDA device(s). Use --gpu-id -1 (the CPU), --system.device auto (a GPU "
            "when there is one), or a --gpu-id that exists.")
    E127 = ("{flag} is not a pretraining setting.{close} `spacy-elmo pretrain --help` lists "
            "the settings (--section.key VALUE, or a shortcut such as --max-steps).")
    E128 = ("preset {preset!r} asks for another shape than the init_weights biLM '{path}' "
            "({differ}; asked vs found). A biLM started from weights keeps their shape: drop "
            "--preset (preset = null in a config file).")
    E129 = ("Cannot resume the run in '{path}' with max_steps {given}: it is already at step "
            "{step}. Pass a larger --max-steps to train on; to use the run as it is, export "
            "it: spacy-elmo export {path} OUT. Nothing was changed.")
    E131 = ("Could not read the pretraining config '{path}': {err}. A config is a .cfg file "
            "with sections ([paths], [corpus], [model], ...; `spacy-elmo "
            "init-pretrain-config` writes one).")
    E132 = "{flag} needs a value (e.g. {flag} 10, or {flag}=10)."
    E140 = ("Training stopped at step {step}: the loss is {loss}, not a finite number; the "
            "weights may be too. {kept} Nothing with non-finite weights was written. Lower "
            "the learning rate (--lr) or use warmup (warmup_steps), check --init-weights, "
            "then continue with --resume (a lower --lr is allowed) or start again.")
    E141 = ("Refusing to write {what}: the weights hold {n} non-finite value(s) (NaN or "
            "inf), e.g. in '{name}'. Nothing was written. Lower the learning rate "
            "(--lr), check --init-weights, or use an earlier checkpoint or snapshot.")
    E142 = ("Cannot resume: the run in '{path}' was trained on other files: {diff}. Give "
            "the run's training files (moved or renamed directories are fine, as long as the "
            "files' names and sizes match), or start a new output directory.")
    E143 = ("'{path}' is a pretraining run without an export (model/): it has not finished. "
            "Export its checkpoint first (spacy-elmo export {path} OUT) or give one of its "
            "snapshots (snapshots/step_N).")
    E144 = ("The text file(s) {paths} hold no tokens (empty, or every line skipped by "
            "skip_pattern): there is nothing to measure. Give text with content.")
    E145 = ("perplexity reads text files, globs or directories; '-' (standard input) is not "
            "read. Write the text to a file first.")
    # Inference precision (E150-E152)
    E150 = "Unknown precision '{precision}'; choose one of: {known}."
    E151 = ("precision 'int8' runs on the CPU only, but the biLM is on {device}. Use fp32 on a "
            "GPU (or run on the CPU).")
    E152 = ("precision 'int8' needs torch's quantized CPU kernels (fbgemm, x86 or oneDNN), which "
            "this torch {version} does not have. Use precision 'fp32', or a torch build with "
            "them (the standard CPU and CUDA wheels have them).")
    # Sharded embed (E153-E159)
    E153 = ("--shard must be i/N with 0 <= i < N (e.g. 0/4 for the first of four), not "
            "{value!r}.")
    E154 = ("Sharded embed needs INPUT as a file that every shard can read, but '{input}' is "
            "standard input or a pipe: write it to a file first, or run without --shard.")
    E155 = ("'{path}' {why}. Pass --overwrite to make this shard again, or choose another "
            "OUTPUT.")
    E156 = ("--stateful and --shard do not go together: a stateful biLM carries its state from "
            "each line to the next, so a shard could not start in the middle of the file. Run "
            "the stateful embed unsharded, or shard without --stateful.")
    # Threads (E160-E164)
    E160 = ("Unknown mode {mode!r} for running the LSTM directions concurrently; choose one "
            "of: {known} (\"auto\": on CPU when torch has two or more threads).")
    # Corpora, run directories, outputs and sizes (E165-E199)
    E165 = ("An empty path was given as {what} text ({given!r}), e.g. an unset variable in "
            "--train \"$CORPUS\": it would name the working directory and everything below "
            "it. Give text files, globs or directories.")
    E166 = ("'{path}' lies inside {what} '{where}': the files of a pretraining run or of a "
            "biLM (vocab.txt, config.json, the export, snapshots) are never read as text. "
            "Give text that lies outside it (copy a file out if it is text you mean).")
    E167 = ("'{output}' would replace the {name} of the biLM in '{where}', which would "
            "destroy it, even with --overwrite. Choose another file name (other files may be "
            "written beside a biLM's weights.hdf5 and options.json).")
    E168 = ("Cannot resume with --vocab '{vocab}': the run in '{path}' trains with the "
            "vocabulary in its checkpoint ({n} words), and this file lists others. Drop "
            "--vocab to resume, or start a new run (another --output) with this vocabulary.")
    E169 = ("'{path}' is not a name `spacy-elmo pretrain` reads as a config: it reads a "
            "config file by its .cfg name (a .json one is refused), and init-pretrain-config "
            "writes the .cfg layout. Name it e.g. '{suggestion}'.")
    E170 = ("Cannot lock '{path}' to write into it ('{lock}': {err}): {fix}. Reading it "
            "(info, perplexity, export into another directory) needs no lock.")
    E171 = ("{what} need about {need} of memory, more than the {have} available ({detail}): "
            "the run would be killed for memory. {fix}.")
    E172 = ("Aborted by a second {signal}: nothing more was written, and a checkpoint being "
            "written was dropped; the last one in '{output}' is as it was (continue with "
            "spacy-elmo pretrain --output {output} --resume).")
    E173 = ("Cannot resume the run in '{path}': its '{name}' is gone (the optimizer state and "
            "the place in the data with it), though its exports are there. Start a new run "
            "from the latest: spacy-elmo pretrain TEXT --init-weights {latest} --output NEW "
            "(or --overwrite to replace this one).")
    # The HTTP server, `spacy-elmo serve` (E200-E219)
    E200 = ("`spacy-elmo serve` needs FastAPI, uvicorn and prometheus_client ({missing} is not "
            "installed): pip install 'spacy-elmo[serve]' (in a checkout: pip install -e "
            "'.[serve]').")
    E201 = ("The request body is {size} bytes, over this server's limit of {limit} bytes "
            "(--max-request-bytes). Send fewer sentences per request.")
    E202 = ("The request has {n} {what}, more than this server's limit of {limit} a request "
            "(--max-sentences). Split it into several requests.")
    E203 = ("The request has {n} tokens, more than this server's limit of {limit} a request "
            "(--max-tokens). Split it into several requests.")
    E204 = ("The request body is not UTF-8 text (byte {offset}: {err}). Send JSON encoded as "
            "UTF-8.")
    E205 = ("The request body is not JSON: {err}. Send one JSON object, e.g. "
            "{{\"sentences\": [[\"Hello\", \"world\"]]}}.")
    E206 = ("The request does not match the {endpoint} schema: {problems}. The schema is at "
            "/docs (OpenAPI: /openapi.json).")
    E207 = ("The request has {problem}: give either `sentences` (lists of tokens) or `texts` "
            "(strings), with at least one item.")
    E208 = ("{where} {problem}. A token is a non-empty string without whitespace (send "
            "untokenized text as `texts`), and text is valid Unicode without NUL characters.")
    E209 = ("The server has {n} requests waiting for the model, its limit (--max-queue). "
            "Send this one again shortly, or to another worker.")
    E210 = ("Cannot tokenize texts for language {lang!r}: {err}. {fix}")
    E211 = ("`mix_weights` and `gamma` go with `layers` \"mix\" only, `mix_weights` is "
            "{n_layers} non-negative numbers with a positive sum (one per layer, token layer "
            "first), and `gamma` a number float32 holds (at most 3.4e38 in size); got {value}.")
    E212 = ("This endpoint answers {offered}, none of which the Accept header {accept!r} takes. "
            "Send Accept: application/json (or one of the others), or no Accept header.")
    E213 = ("The request's Content-Type is {content_type!r}; send the body as JSON with "
            "Content-Type: application/json (curl: --json, or -H 'Content-Type: "
            "application/json').")
    E214 = ("{path} needs a spaCy pipeline, but this server runs a biLM alone. Start it with a "
            "saved pipeline that has an `elmo` component: spacy-elmo serve PIPELINE_DIR.")
    E215 = ("No {method} {path} here: the endpoints are {endpoints} (API docs at /docs).")
    E216 = ("The server is stopping and takes no more requests: send this request again, to "
            "another worker or once the server is back.")
    E217 = ("The server failed on this request ({err}); its log has the details. Other "
            "requests are not affected.")
    E218 = ("The spaCy pipeline '{path}' has no `elmo` component (its components: {pipes}). "
            "Serve a pipeline with one, or its biLM directly: spacy-elmo serve WEIGHTS.")
    E219 = ("spaCy cannot use GPU {gpu_id} for the pipeline ({err}). Install CuPy for your CUDA "
            "(pip install 'spacy-elmo[cuda12x]'), or serve on the CPU (--gpu-id -1).")
    # E220-E229: the lab's layer probes (spacy_elmo_lab.errors)
    # bf16 precision (E230-E249)
    E230 = ("precision 'bf16' on {device}, which has no native bf16 matrix units (AVX512-BF16 "
            "or AMX on a CPU, Ampere or newer on a GPU): torch would emulate every bf16 matmul, "
            "several times slower than fp32 (on an AVX-512 CPU without them, a fifth to a "
            "seventh of the fp32 rate). Use precision 'fp32' here (or 'int8' for inference on "
            "the CPU). To run bf16 anyway, e.g. to test it, set the environment variable "
            "SPACY_ELMO_ALLOW_EMULATED_BF16=1.")
    E231 = ("Unknown training precision '{precision}'; choose one of: {known} (int8 serves "
            "inference only).")
    # 1.0 pretraining formats (E250-E259, W045-W046)
    E250 = ("'{path}' names a JSON file, but pretraining configs are .cfg files (spacy-elmo "
            "0.1 read JSON ones). Write its keys under their sections in a .cfg (`spacy-elmo "
            "init-pretrain-config NEW.cfg` writes them all; docs/pretrain_settings.md names "
            "each key's section, `options` is [model.options]), or let spacy-elmo 0.1 do it: "
            "`spacy-elmo pretrain --config {path} --dry-run > NEW.cfg`. A run's own "
            "config.json is its record: continue the run with `spacy-elmo pretrain --output "
            "RUN --resume`.")
    E251 = ("'{path}' is a checkpoint of spacy-elmo 0.1 ({found}, not the checksum over its "
            "whole content that checkpoints carry from then on), which this version does not "
            "read. Continue from the run's export as a new run: `spacy-elmo pretrain "
            "CONFIG.cfg TEXT... --output NEW --init-weights {run}/model` (or a snapshot, "
            "{run}/snapshots/step_N), which keeps its weights, softmax and vocabulary (not "
            "its optimizer state: give it the steps left). A run without an export: export "
            "it with spacy-elmo 0.1 (`spacy-elmo export {run} OUT`) first, or start it "
            "over.")
    E252 = ("{flag} is gone (spacy-elmo 0.1 took the config file so): give the config file as "
            "the first argument, `spacy-elmo pretrain CONFIG.cfg [TEXT]... [--section.key "
            "VALUE]...`.")
    E253 = ("'{path}' looks like a pretraining config, but it is not the first argument, so it "
            "would be read as training (or dev) text. Give the config file first: spacy-elmo "
            "pretrain CONFIG.cfg [TEXT ...] [--section.key value ...].")
    # 1.0 pipeline formats (E260-E269, W047-W048)
    E260 = ("'{path}' holds a biLM saved without a checksum of its tensors: it was saved by "
            "spacy-elmo before 1.0, whose pipelines 1.0 does not load. Build the pipeline "
            "again with spacy-elmo 1.0: add the `elmo` component with its weights "
            "(nlp.add_pipe(\"elmo\", config={{\"weights\": ...}}) or [components.elmo] weights), "
            "train the components that use it again (spacy train), and save it.")
    E261 = ("The task's layer mix does not record the width of the ELMo vectors it was "
            "trained on: it was saved by spacy-elmo before 1.0, so a biLM of another width "
            "cannot be told apart. Train the task again with spacy-elmo 1.0 and save the "
            "pipeline.")
    E262 = ("The layer mix (spacy-elmo.ScalarMix.v1) does not know the width of the layers it "
            "mixes: initialize it with sample layers (model.initialize(X=...)), or give it "
            "`width`.")
    # The HTTP server, continued, and the mix scale (E270-E275)
    E270 = ("`gamma` {gamma} scales the mixed vectors past what float32 holds (some are "
            "infinite): give a `gamma` of ordinary size (learned ones are near 1), or leave it "
            "out.")
    E271 = ("The answer would hold {n:,} numbers as JSON, more than this server's limit of "
            "{limit:,} (--max-json-values; JSON takes about 12 bytes a number). Ask for it as "
            "binary (Accept: application/x-npy or application/octet-stream), for fewer layers "
            "(`layers` \"top\" or \"mix\"), or send fewer tokens a request.")
    E272 = ("Cannot serve on {host}:{port}: {err}. Another process may be listening there: "
            "stop it, or give another --port (0: any free one); --host must be an address of "
            "this machine (127.0.0.1, 0.0.0.0, ::1, or one of its own).")
    E273 = ("RANK={rank!r} and WORLD_SIZE={world!r} in the environment do not name a shard "
            "(torchrun sets RANK to 0 .. WORLD_SIZE-1): unset them to embed the whole file, or "
            "give the shard as --shard i/N.")
    E274 = ("Stopped by Ctrl-C (SIGINT) while the model was loading: nothing was served.")
    E275 = ("The server's model thread has ended ({err}), so it cannot answer: restart the "
            "server (its log has the details); send this request again to another worker.")
    # Widening a biLM (E276-E279)
    E276 = ("This biLM reads a word dictionary (an ELMoForManyLangs model): `widen` writes the "
            "bilm-tf layout, which has no place for one. Widen a byte-character biLM (the "
            "bundled ones, a published AllenNLP model, or an export of `spacy-elmo pretrain`).")
    E277 = ("--lstm-dim {given!r} does not widen this biLM, which has {have} cells a layer: "
            "give a whole number larger than {have} (a narrower LSTM cannot compute the "
            "same outputs).")
    E278 = ("The widened biLM's outputs differ from the original's by {diff:.3g} (at most "
            "{limit:.3g} expected from float rounding), so nothing was written to '{output}'. "
            "The source's weights may hold very large values: check them with `spacy-elmo "
            "info`.")
    E279 = ("--lstm-dim {given:,} would make a biLM of {params:,} parameters, about {need} of "
            "memory to build and check, more than the {have} available: give a smaller "
            "--lstm-dim (the published biLMs have 4,096 cells a layer).")
    # The HTTP server's connections (E280-E289)
    E280 = ("--step-tokens {step:,} is more than --max-batch-tokens {batch:,}: a long request's "
            "step must fit in a batch. Lower --step-tokens or raise --max-batch-tokens.")
    E281 = ("The server has {open:,} connections open, its limit (--max-connections {limit:,}): "
            "this one is closed. Send the request again in a moment, or to another worker; "
            "reuse connections (keep-alive) instead of opening one a request.")
    E282 = ("The request's {what} did not arrive within {seconds:g} s ({flag}): the connection "
            "is closed. Send whole requests without pausing.")
    E283 = ("Binary answers (Accept: {media}) hold vectors only, not the tokens spaCy made of "
            "`texts`, so they could not be lined up with words. Send `sentences` (tokens) for a "
            "binary answer, or accept application/json, whose answer to `texts` gives the "
            "tokens.")
    # E290-E299: the lab's table tools (spacy_elmo_lab.errors)


class Warnings(metaclass=Catalogue):
    # Reading models and text (W001-W009)
    W001 = ("Options say n_characters=261 (the bilm-tf training layout). Loaded as 262 "
            "(inference layout); the vectors are the same.")
    W002 = ("{n} token(s) are longer than this biLM's budget of {limit} UTF-8 bytes "
            "(max_characters_per_token - 2; {cjk} CJK characters) and were cut to it, e.g. "
            "{example!r}. The biLM cannot see past the cut. Split such tokens (e.g. spaCy's "
            "'char' segmenter for Chinese), or pretrain a model with a larger "
            "max_characters_per_token. (Shown once per model.)")
    W003 = ("An ELMo listener got docs without ELMo layers of their length and used zero "
            "vectors for them: the `elmo` component did not run on these docs (disabled, or "
            "the docs were made elsewhere), or they were retokenized after it ran. Run the "
            "whole pipeline with `elmo` enabled, and retokenizing components before it.")
    W004 = ("{n} token(s) are longer than this biLM's budget of {limit} characters "
            "(max_characters_per_token - 2) and were cut to it, e.g. {example!r}; the cut form "
            "is also the word looked up. (Shown once per model.)")
    W005 = ("{n} line(s) of {paths} are not UTF-8 text (or hold NUL bytes) and were skipped "
            "({during}). Re-encode the files as UTF-8 (e.g. `iconv -f latin1 -t utf-8`) to "
            "use them.")
    W006 = ("[components.{name}] weights is {weights!r}, but the pipeline being loaded was "
            "saved with {saved}, which it carries and runs: its tasks were "
            "trained on that one. To use other weights, train the pipeline again with them.")
    # Pretraining (W010-W019)
    W010 = ("precision 'bf16' on {device}, which has no native bf16 matrix units (AVX512-BF16 "
            "or AMX on a CPU; Ampere or newer on a GPU): its bf16 matmuls are emulated and much "
            "slower than fp32 (measured: about 100x on an AVX2 CPU). Use precision 'fp32' here.")
    W011 = ("Stopped by {signal} at step {step}; checkpoint saved. Continue with: spacy-elmo "
            "pretrain --output {output} --resume")
    W012 = ("matplotlib is not installed: no curves.png (pip install 'spacy-elmo[plot]'; in a "
            "checkout: pip install -e '.[plot]').")
    W013 = ("optimizer 'adam' updates every softmax row at every step, also the rows the sampled "
            "softmax did not touch, which then drift on their momentum: the full-softmax "
            "(dev) perplexity can explode while the training loss falls. Use 'lazyadam' "
            "(the same Adam, softmax rows moved only when sampled) or 'adagrad'.")
    W014 = ("Could not append to '{path}' ({err}): this and later metrics records are "
            "missing from it until writing works again; training goes on, and checkpoints "
            "report their own write errors.")
    W016 = ("Could not write '{path}' ({err}): the curves are not redrawn until writing works "
            "again; training goes on (metrics.jsonl holds every figure).")
    W017 = ("The lock '{lock}' was left by {holder}, which ended without releasing it "
            "(killed, or the machine went down): taking it over.")
    W018 = ("The run directory '{output}' lies inside the corpus {pattern!r}: its files "
            "(vocab.txt, snapshots, the export), like those of any other run or biLM "
            "directory there, are not read as training or dev text.")
    W019 = ("The resumed run's learning-rate schedule changes with {changed}: the {schedule} "
            "schedule is spread over the new steps, so the rate at step {step} goes from "
            "{before:.3g} to {after:.3g} (and follows the new curve from here). To keep the "
            "run's schedule, resume with its settings ({kept}); to train on past a finished "
            "schedule, start another leg from an export (--init-weights) with its own warmup "
            "and decay (docs/pretraining.md).")
    # Experiments and configs (W020-W024)
    W020 = ("Vectors are loaded ([initialize] vectors = {vectors!r}) but no layer reads them "
            "(include_static_vectors is false everywhere): the model trains without them. "
            "Switch them on, e.g. --components.tok2vec.model.embed.include_static_vectors "
            "true (the CNN configs) or --components.<task>.model.tok2vec.features."
            "include_static_vectors true (the [features ; ELMo] configs).")
    # Shards, corpora, runs and sizes (W025-W029)
    W025 = ("'{path}' is damaged ({detail}): {action}. A shard file is made whole or not at "
            "all, so the disk or a copy changed it; check the storage if this repeats.")
    W026 = ("{n} director(ies) inside the corpus {pattern!r} hold a pretraining run or a "
            "biLM ({dirs}): their files are left out, never read as text.")
    W027 = ("{what} need about {need} of memory, more than half of the {have} available "
            "({detail}): other processes may run short, or this one be killed. Lower "
            "--batch-size, --window or --shuffle-buffer if it is not meant.")
    # The HTTP server (W030-W034)
    W030 = ("Serving on {host}, which other machines can reach: the server has no "
            "authentication or TLS of its own. Put it behind a proxy that has them, or bind "
            "127.0.0.1 (the default).")
    W031 = ("Stopped by {signal}: {refused} request(s) still waiting after --shutdown-timeout "
            "{timeout} s were refused (HTTP 503); those in the biLM were answered.")
    W032 = ("A batch of {n} requests failed in the model ({err}); each was run again on its "
            "own, so only the request that fails alone gets an error (HTTP 500).")
    W033 = ("Refused {n:,} connection(s) (HTTP 503, E281) in the last {seconds:g} s: {open:,} "
            "open, the limit (--max-connections {limit:,}).")
    W034 = ("Closed {n:,} connection(s) in the last {seconds:g} s whose client read nothing of "
            "its answer for {timeout:g} s (--send-timeout): the answers were dropped.")
    # W035-W039: the lab's layer probes (spacy_elmo_lab.errors)
    # The HTTP server's connections (W040-W044)
    W040 = ("--max-connections {asked:,} lowered to {allowed:,}: this process may open {files:,} "
            "files (ulimit -n), and {reserve} are kept for the model and the log. Raise the "
            "limit (ulimit -n, or LimitNOFILE= in a systemd unit) to allow more.")
    W041 = ("Accepting no connections for a second ({n:,} time(s) in the last {seconds:g} s): "
            "{open:,} are open, past --max-connections {limit:,} and the refusals being "
            "closed; new clients wait in the listen queue.")

"""One catalogue of the error and warning messages spacy-elmo raises, with codes."""

from __future__ import annotations


class ElmoError(ValueError):
    """A problem the user can fix: the message names it and says how."""


class Errors:
    # Files and formats
    E001 = "No such file: '{path}'. Check the path (it is resolved relative to '{cwd}')."
    E002 = ("Could not read '{path}' as {kind}: {err}. The file may be truncated or of another "
            "format; download or export it again.")
    E003 = ("'{path}' has no dataset '{name}': it is not a bilm-tf/AllenNLP ELMo weights file "
            "(expected datasets such as 'char_embed', 'CNN/W_cnn_0', 'RNN_0/...'). {hint}")
    E004 = ("Weights do not match the options: dataset '{name}' in '{path}' has shape {found}, "
            "but the options ask for {expected}. Use the options.json that came with these weights.")
    E005 = ("Options file '{path}' is missing the key '{key}'. An ELMo options.json has 'lstm' "
            "{{dim, projection_dim, n_layers, cell_clip, proj_clip, use_skip_connections}} and "
            "'char_cnn' {{activation, embedding{{dim}}, filters, max_characters_per_token, "
            "n_characters, n_highway}}.")
    E006 = ("Options: 'char_cnn.n_characters' is {value}; ELMo models use 262 (inference "
            "layout, id 0 = padding) or 261 (bilm-tf training layout). Both load the same "
            "261-row 'char_embed'; any other value means the options belong to another model.")
    E007 = "Options: {key} must be {what}, got {value!r}."
    E008 = ("'{path}' is a directory but holds no '{name}'. Pass the file itself, or a directory "
            "with both 'options.json' and 'weights.hdf5'.")
    E009 = "Cannot write '{path}': {err}."
    # Inputs
    E010 = ("Line {line} of '{path}' is not valid UTF-8 ({err}). Re-encode the file as UTF-8, "
            "e.g. `iconv -f latin1 -t utf-8`.")
    E011 = ("The batch has {n} sentence(s) with {n_tokens} tokens in total, over the limit of "
            "{limit} tokens per sentence. Split the text into sentences, or raise "
            "'max_sentence_tokens'.")
    E012 = "Unknown value {value!r} for {name}; choose one of {choices}."
    E013 = ("Character ids must be a (batch, tokens, {n_chars}) integer tensor; got shape "
            "{shape} and dtype {dtype}.")
    E014 = ("Stateful mode needs at most {max_rows} rows per batch (the state was made for that "
            "many); got {rows}. Call reset_state() or create the runner with more rows.")
    E015 = "--gpu-id {gpu_id} was given, but torch sees no CUDA device. Drop --gpu-id to run on CPU."


class Warnings:
    W001 = ("Options say n_characters=261 (the bilm-tf training layout). Loaded as 262 "
            "(inference layout); the vectors are the same.")

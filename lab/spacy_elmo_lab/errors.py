"""The lab's catalogue: the messages only the lab's commands show, with codes, as the
library's (`spacy_elmo.errors`) are. `Errors` and `Warnings` here extend the library's, so
that `Errors.E001` and `Errors.E220` both read with their code in front ("[E220] ...");
the lab's codes are numbers the library keeps free (E220-E229, E290-E299, W035-W039). They reach the
user as the library's do: raised as an `ElmoError`, warned with `warn` (an ElmoWarning)."""

from spacy_elmo import errors


class Errors(errors.Errors):
    # Layer probes: word senses and parts of speech (E220-E229)
    E220 = ("Line {line} of '{path}' is not a SemCor sentence: {problem}. Each line is a JSON "
            "object with 'tokens' (the words; a multiword expression joined by '_') and "
            "'senses' (one list of WordNet sense keys per token, empty where untagged).")
    E221 = ("'{path}' is not a word sense disambiguation set in the unified framework's "
            "format: {problem}. Give NAME.data.xml with NAME.gold.key.txt beside it, or the "
            "directory that holds the pair.")
    E222 = ("'{path}': {problem}. In the unified framework's format every <instance> has an "
            "id, a lemma and a pos (NOUN, VERB, ADJ or ADV) and its word(s) as text.")
    E223 = ("'{path}' gives no gold sense for {n} instance(s) of '{data}' (e.g. {example}): "
            "the files do not belong together. Use the .gold.key.txt that came with the "
            ".data.xml.")
    E224 = "Line {line} of '{path}' is not 'INSTANCE_ID SENSE_KEY [SENSE_KEY ...]': {text!r}."
    E225 = ("{key!r} (line {line} of '{path}') is not a WordNet sense key (lemma%ss_type:"
            "lex_filenum:lex_id:head_word:head_id, ss_type 1-5).")
    E226 = ("'{path}' holds no sense-tagged token: the probe needs SemCor's tagged tokens for "
            "its sense centroids and its most-frequent-sense baseline.")
    E227 = ("Line {line} of '{path}' is not a CoNLL-U word line (10 tab-separated columns: "
            "ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC): {text!r}.")
    E228 = ("'{path}' has no {split} file ({patterns}). Give a Universal Dependencies "
            "treebank directory holding its train, dev and test .conllu files (e.g. "
            "en_ewt-ud-train.conllu).")
    E229 = ("The {split} file '{path}' holds no sentence (no CoNLL-U word line): the probe "
            "has nothing to {what}. Give the treebank's {split} file.")
    # The tables' tools (E290-E299)
    E290 = ("'{path}' holds no evaluation row of spaCy's training table (a line of epoch, "
            "step, losses and scores under the header 'E  #  ...  SCORE'): the run stopped "
            "before its first evaluation, or this is not a `spacy train` log. Give the "
            "training/<run>/train.log of a cell that `spacy_elmo_lab.run_table` ran.")
    E291 = ("'{path}' holds no cell's training log (<run>/train.log){which}. Give the "
            "directory `spacy_elmo_lab.run_table` trained into (training by default).")


class Warnings(errors.Warnings):
    # Layer probes (W035-W039)
    W035 = ("{n} {split} token(s) have {tagset} tags that the training file never has "
            "({tags}): the probe counts them wrong.")

"""Sharded `embed`: shards that together give the single-process file, an index that opens
as one, reruns that redo only missing shards (also after a killed process), torchrun."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from spacy_elmo.embed.job import embed_file
from spacy_elmo.embed.shards import parse_shard, shard_path
from spacy_elmo.errors import ElmoError

LINES = ["The cat sat .", "", "A dog ran far away .", "The cat sat .", "hello",
         "Ünïcode wörds 中文 here", "one more line of text ."]


def _input(tmp_path, lines=LINES):
    path = tmp_path / "in.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _read(path):
    with h5py.File(path, "r") as f:
        index = json.loads(f["sentence_to_index"][0])
        return {k: f[k][()] for k in f if k != "sentence_to_index"}, index


def _embed(text, out, weights, **kwargs):
    return embed_file(text, out, weights=weights, progress=False, **kwargs)


@pytest.mark.parametrize("exact", [False, True])
def test_shards_give_the_single_process_file(tmp_path, tiny_weights_dir, exact, monkeypatch):
    text = _input(tmp_path)
    settings = {"batch_size": 1, "word_cache": 0} if exact else {}
    _embed(text, tmp_path / "single.h5", tiny_weights_dir, **settings)
    out = tmp_path / "out.h5"
    written = [_embed(text, out, tiny_weights_dir, shard=f"{i}/3", **settings)
               for i in range(3)]
    assert written == [3, 2, 2]
    single, single_index = _read(tmp_path / "single.h5")
    monkeypatch.chdir(tmp_path.parent)  # the index finds its shards beside it, from anywhere
    sharded, index = _read(out)
    assert index == single_index and sorted(sharded) == sorted(single)
    for name, array in single.items():
        if exact:  # one sentence a batch, no word cache: bitwise the same
            np.testing.assert_array_equal(sharded[name], array)
        else:  # other batches: the same up to float32 rounding
            np.testing.assert_allclose(sharded[name], array, rtol=0, atol=1e-6)
    with h5py.File(out, "r") as f:
        assert f["0"].is_virtual


def test_a_rerun_redoes_only_the_missing_shards(tmp_path, tiny_weights_dir):
    text, out = _input(tmp_path), tmp_path / "out.h5"
    assert _embed(text, out, tiny_weights_dir, shard="0/2") == 4
    assert not out.exists()  # shard 1 is missing: no index yet
    first = shard_path(out, parse_shard("0/2"))
    stamp = first.stat().st_mtime_ns
    assert _embed(text, out, tiny_weights_dir, shard="0/2") == 0  # finished: kept as it is
    assert first.stat().st_mtime_ns == stamp
    assert _embed(text, out, tiny_weights_dir, shard="1/2") == 3
    assert out.exists() and len(_read(out)[0]) == len(LINES)


def test_a_shard_of_other_input_or_settings_needs_overwrite(tmp_path, tiny_weights_dir):
    text, out = _input(tmp_path), tmp_path / "out.h5"
    _embed(text, out, tiny_weights_dir, shard="0/2")
    text.write_text("something else entirely\n", encoding="utf-8")
    with pytest.raises(ElmoError, match=r"\[E155\]"):
        _embed(text, out, tiny_weights_dir, shard="0/2")
    assert _embed(text, out, tiny_weights_dir, shard="0/2", overwrite=True) == 1
    with pytest.raises(ElmoError, match=r"\[E155\]"):  # another layer mode: other vectors
        _embed(text, out, tiny_weights_dir, shard="0/2", layers="top")


@pytest.mark.parametrize("value", ["2/2", "1", "-1/2", "a/b", "0/0"])
def test_a_bad_shard_is_refused(tmp_path, tiny_weights_dir, value):
    with pytest.raises(ElmoError, match=r"\[E153\]"):
        _embed(_input(tmp_path), tmp_path / "o.h5", tiny_weights_dir, shard=value)


def test_a_stateful_embed_is_not_sharded(tmp_path, tiny_weights_dir):
    """A regular file with --stateful: the message names the two flags, not a pipe."""
    with pytest.raises(ElmoError, match=r"\[E156\] --stateful and --shard") as caught:
        _embed(_input(tmp_path), tmp_path / "o.h5", tiny_weights_dir, shard="0/2",
               stateful=True)
    assert "pipe" not in str(caught.value)
    assert not list(tmp_path.glob("o.h5*"))


def test_shards_need_a_file_every_shard_can_read(tmp_path, tiny_weights_dir):
    with pytest.raises(ElmoError, match=r"\[E154\]"):
        _embed(Path("-"), tmp_path / "o.h5", tiny_weights_dir, shard="0/2")
    assert not list(tmp_path.glob("o.h5*"))


def _cli(*args):
    return [sys.executable, "-m", "spacy_elmo", "embed", *map(str, args)]


def test_a_killed_shard_leaves_nothing_and_the_rerun_finishes(tmp_path, tiny_weights_dir):
    text = _input(tmp_path, [f"line {i} of a longer text to embed ." for i in range(3000)])
    out = tmp_path / "out.h5"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen(_cli(text, out, "--weights", tiny_weights_dir, "--shard", "1/2"),
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    part = shard_path(out, parse_shard("1/2"))
    deadline = time.time() + 60
    while time.time() < deadline and not any(p.name.startswith(".tmp-")
                                             for p in tmp_path.iterdir()):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not part.exists() and not out.exists()
    # the same shards again (here, in this process): shard 1 is made, then the index
    written = [_embed(text, out, tiny_weights_dir, shard=f"{i}/2") for i in (0, 1)]
    assert written == [1500, 1500]
    assert len(_read(out)[0]) == 3000
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]


def test_torchrun_shards_by_rank(tmp_path, tiny_weights_dir):
    text, out = _input(tmp_path), tmp_path / "out.h5"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node",
                          "2", "-m", "spacy_elmo", "embed", str(text), str(out), "--weights",
                          str(tiny_weights_dir)], env=env, capture_output=True, text=True,
                         cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    _embed(text, tmp_path / "single.h5", tiny_weights_dir)
    single, index = _read(tmp_path / "single.h5")
    sharded, sharded_index = _read(out)
    assert sharded_index == index
    for name, array in single.items():
        np.testing.assert_allclose(sharded[name], array, rtol=0, atol=1e-6)


def _weights(tmp_path, seed):
    from spacy_elmo_lab.tiny import make_random_bilm

    from spacy_elmo.bilm import save_bilm

    directory = tmp_path / "w"
    save_bilm(make_random_bilm(seed=seed), directory)
    return directory


def _lines(n=6):
    return [f"line {i} of the text ." for i in range(n)]


def test_shards_are_keyed_by_the_content_of_the_weights_not_their_path(tmp_path, capsys):
    """The same weights path, other weights (a run exported again): not one index of two
    biLMs; --overwrite makes the shard again (it does not keep the stale one)."""
    text, out = _input(tmp_path, _lines()), tmp_path / "out.h5"
    weights = _weights(tmp_path, seed=0)
    _embed(text, out, weights, shard="0/2")
    weights = _weights(tmp_path, seed=1)  # replaced in place
    assert _embed(text, out, weights, shard="1/2") == 3
    assert not out.exists()
    assert "again with --overwrite): 0/2" in " ".join(capsys.readouterr().out.split())
    with pytest.raises(ElmoError, match=r"\[E155\].*other weights"):
        _embed(text, out, weights, shard="0/2")
    assert _embed(text, out, weights, shard="0/2", overwrite=True) == 3
    assert "Wrote 3 sentence(s)" in capsys.readouterr().out
    _embed(text, tmp_path / "single.h5", weights)
    single, _ = _read(tmp_path / "single.h5")
    sharded, _ = _read(out)
    for name, array in single.items():
        np.testing.assert_allclose(sharded[name], array, rtol=0, atol=1e-6)


def test_a_kept_shard_says_so_and_overwrite_makes_it_again(tmp_path, tiny_weights_dir,
                                                           capsys):
    text, out = _input(tmp_path, _lines()), tmp_path / "out.h5"
    _embed(text, out, tiny_weights_dir, shard="0/2")
    capsys.readouterr()
    assert _embed(text, out, tiny_weights_dir, shard="0/2") == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "is done already" in said and "Wrote" not in said
    assert _embed(text, out, tiny_weights_dir, shard="0/2", overwrite=True) == 3


def _damage(path, name="0", n_bytes=400):
    with h5py.File(path, "r") as f:
        offset = f[name].id.get_offset()
    data = bytearray(path.read_bytes())
    for i in range(offset, offset + n_bytes):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))


def test_a_damaged_shard_is_found_by_its_checksum_and_made_again(tmp_path,
                                                                 tiny_weights_dir):
    text, out = _input(tmp_path, _lines()), tmp_path / "out.h5"
    first = shard_path(out, parse_shard("0/2"))
    _embed(text, out, tiny_weights_dir, shard="0/2")
    good, _ = _read(first)
    _damage(first)
    assert not np.array_equal(_read(first)[0]["0"], good["0"])
    with pytest.warns(UserWarning, match=r"\[W025\].*not indexed"):  # found by the last one
        _embed(text, out, tiny_weights_dir, shard="1/2")
    assert not out.exists()
    with pytest.warns(UserWarning, match=r"\[W025\].*making it again"):
        assert _embed(text, out, tiny_weights_dir, shard="0/2") == 3
    sharded, _ = _read(out)
    np.testing.assert_array_equal(sharded["0"], good["0"])


def test_a_stale_index_is_removed_before_a_shard_is_made_again(tmp_path, tiny_weights_dir):
    text, out = _input(tmp_path, _lines()), tmp_path / "out.h5"
    for i in range(2):
        _embed(text, out, tiny_weights_dir, shard=f"{i}/2")
    assert out.exists()
    _embed(text, out, tiny_weights_dir, shard="0/2", layers="top", overwrite=True)
    assert not out.exists()  # it pointed at data of another layout; shard 1 is still "all"
    _embed(text, out, tiny_weights_dir, shard="1/2", layers="top", overwrite=True)
    assert all(array.ndim == 2 for array in _read(out)[0].values())


def test_a_shard_file_gone_reads_as_nan_never_as_zeros(tmp_path, tiny_weights_dir):
    text, out = _input(tmp_path, _lines()), tmp_path / "out.h5"
    for i in range(2):
        _embed(text, out, tiny_weights_dir, shard=f"{i}/2")
    shard_path(out, parse_shard("1/2")).unlink()
    sharded, _ = _read(out)
    assert np.isnan(sharded["1"]).all() and np.isfinite(sharded["0"]).all()


@pytest.mark.parametrize("rank,world", [("2", "2"), ("x", "2"), ("0", "two"), ("-1", "2"),
                                        ("\u00b2", "3")])
def test_a_torchrun_environment_that_names_no_shard_is_refused(tmp_path, tiny_weights_dir,
                                                               monkeypatch, rank, world):
    monkeypatch.setenv("RANK", rank)
    monkeypatch.setenv("WORLD_SIZE", world)
    with pytest.raises(ElmoError, match=r"\[E273\] RANK=.* and WORLD_SIZE="):
        _embed(_input(tmp_path), tmp_path / "o.h5", tiny_weights_dir)
    assert not list(tmp_path.glob("o.h5*"))


def test_a_world_of_one_embeds_the_whole_file(tmp_path, tiny_weights_dir, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("RANK", "whatever")  # unused without a world of several
    _embed(_input(tmp_path), tmp_path / "o.h5", tiny_weights_dir)
    assert (tmp_path / "o.h5").is_file() and not list(tmp_path.glob("o.h5.shard-*"))

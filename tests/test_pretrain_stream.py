"""Streaming pretraining (``--stream``): same batches on resume, memory bounded as the corpus grows."""

from __future__ import annotations

import random
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch

from spacy_elmo_mix.bilm import BiLMOptions, ElmoEmbedder
from spacy_elmo_mix.cli.pretrain import main as pretrain_main
from spacy_elmo_mix.pretrain import TrainConfig, Trainer
from spacy_elmo_mix.pretrain.checkpoint import load_checkpoint
from spacy_elmo_mix.pretrain.data import prepare_data
from spacy_elmo_mix.pretrain.model import LanguageModel
from spacy_elmo_mix.pretrain.stream import StreamingData, count_words

TINY = {
    "lstm": {
        "dim": 24,
        "projection_dim": 8,
        "n_layers": 2,
        "cell_clip": 3,
        "proj_clip": 3,
        "use_skip_connections": True,
    },
    "char_cnn": {
        "activation": "relu",
        "filters": [[1, 4], [2, 8]],
        "n_highway": 1,
        "embedding": {"dim": 4},
        "n_characters": 262,
        "max_characters_per_token": 50,
    },
}
WORDS = [f"w{i}" for i in range(2000)]


def zipf_corpus(path: Path, n_lines: int, seed: int = 0) -> Path:
    """``n_lines`` lines of 1-25 words drawn with Zipfian frequencies from a fixed 2000-word list."""
    rng = random.Random(seed)
    weights = [1 / (i + 1) for i in range(len(WORDS))]
    lines = (" ".join(rng.choices(WORDS, weights, k=rng.randint(1, 25))) for _ in range(n_lines))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def make_trainer(train: Path, heldout: Path, output: Path, **config) -> Trainer:
    data = StreamingData([train], [heldout], max_len=10, pretokenized=True, min_count=1)
    settings = {
        "tokens_per_batch": 120,
        "lr": 1e-2,
        "warmup_steps": 2,
        "eval_every": 0,
        "checkpoint_every": 0,
        "seed": 3,
        "dropout": 0.0,
    }
    cfg = TrainConfig(**{**settings, **config})
    torch.manual_seed(cfg.seed)
    return Trainer(LanguageModel(BiLMOptions.from_dict(TINY), len(data.vocab), dropout=0.0), data, cfg, output)


def test_epoch_batches_cover_the_stream_once_and_resume_mid_epoch(tmp_path):
    train = zipf_corpus(tmp_path / "train.txt", 300)
    data = StreamingData([train], [], max_len=10, pretokenized=True, min_count=1)
    batches = list(data.epoch_batches(100, seed=1, epoch=0))
    windows = sorted(" ".join(w) for b in batches for w in b)
    expected = sorted(" ".join(line[i : i + 10]) for line in data.lines([train]) for i in range(0, len(line), 10))
    assert windows == expected and len(batches) > 10
    assert list(data.epoch_batches(100, seed=1, epoch=0, start=7)) == batches[7:]
    assert list(data.epoch_batches(100, seed=1, epoch=1)) != batches


def test_streamed_vocabulary_and_counts_match_the_in_memory_ones(tmp_path):
    train = zipf_corpus(tmp_path / "train.txt", 400)
    heldout = zipf_corpus(tmp_path / "heldout.txt", 40, seed=1)
    streamed = StreamingData([train], [heldout], max_len=10, pretokenized=True, min_count=2, max_vocab=500)
    memory = prepare_data([train], [heldout], max_len=10, pretokenized=True, min_count=2, max_vocab=500)
    assert streamed.vocab.words == memory.vocab.words
    np.testing.assert_array_equal(streamed.train_counts(), memory.train_counts())
    np.testing.assert_array_equal(streamed.heldout_counts(), memory.heldout_counts())
    assert streamed.summary["train_tokens"] == memory.summary["train_tokens"]
    assert streamed.summary["train_lines"] == memory.summary["train_lines"]


def test_bounded_counter_keeps_the_frequent_words():
    rng = random.Random(0)
    lines = [[f"frequent{rng.randint(0, 9)}"] + [f"rare{rng.random()}" for _ in range(5)] for _ in range(3000)]
    counts, n_lines, n_tokens, n_windows = count_words(iter(lines), cap=500, max_len=4)
    assert len(counts) <= 501 and (n_lines, n_tokens, n_windows) == (3000, 18000, 6000)
    assert all(f"frequent{i}" in counts for i in range(10))


def test_stream_training_resumes_identically(tmp_path):
    train = zipf_corpus(tmp_path / "train.txt", 200)
    heldout = zipf_corpus(tmp_path / "heldout.txt", 20, seed=1)
    straight = make_trainer(train, heldout, tmp_path / "straight", max_steps=12)
    straight.train(progress=False)
    first = make_trainer(train, heldout, tmp_path / "split", max_steps=5)
    first.train(progress=False)
    resumed = make_trainer(train, heldout, tmp_path / "split", max_steps=12)
    resumed.load_state_dict(load_checkpoint(first.checkpoint_path))
    resumed.train(progress=False)
    assert [r[:4] for r in resumed.history["train"]] == [r[:4] for r in straight.history["train"]]
    for (name, a), b in zip(straight.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(a, b), name


def test_cli_stream_exports_a_loadable_model(tmp_path, capsys):
    train = zipf_corpus(tmp_path / "train.txt", 200)
    heldout = zipf_corpus(tmp_path / "heldout.txt", 20, seed=1)
    out = tmp_path / "out"
    args = [
        str(train),
        "--heldout",
        str(heldout),
        "--output",
        str(out),
        "--stream",
        "--pretokenized",
        "--min-count",
        "1",
        "--lstm-dim",
        "24",
        "--projection-dim",
        "8",
        "--filters",
        "1:4,2:8",
        "--char-dim",
        "4",
        "--max-steps",
        "3",
        "--no-progress",
    ]
    assert pretrain_main(args) == 0
    assert "unigram" in capsys.readouterr().out
    assert ElmoEmbedder(out / "options.json", out / "weights.hdf5").embed_batch([["w1", "w2"]])[0].shape == (3, 2, 16)
    assert (
        pretrain_main(
            [
                str(train),
                "--heldout",
                str(heldout),
                "--output",
                str(out),
                "--stream",
                "--pretokenized",
                "--resume",
                "--max-steps",
                "5",
                "--no-progress",
            ]
        )
        == 0
    )
    assert load_checkpoint(out / "checkpoint.pt")["position"]["step"] == 5


def peak_bytes(read) -> int:
    """Peak Python-heap bytes (numpy arrays included) while ``read()`` runs."""
    tracemalloc.start()
    try:
        read()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("streamed", [True, False])
def test_memory_is_bounded_when_streaming_and_grows_in_memory(tmp_path, streamed):
    """One epoch's batches at 1x and 4x the corpus: streaming peak memory stays flat (ratio < 1.5);
    the in-memory reader grows with the corpus (ratio > 2.0), which shows the measure can tell."""
    small = zipf_corpus(tmp_path / "small.txt", 3000)
    large = zipf_corpus(tmp_path / "large.txt", 12000, seed=1)

    def epoch(path):
        def run():
            reader = StreamingData if streamed else prepare_data
            data = reader([path], [], 20, True, 1, 1000)
            for _ in data.epoch_batches(200, seed=0, epoch=0):
                pass

        return run

    ratio = peak_bytes(epoch(large)) / peak_bytes(epoch(small))
    if streamed:
        assert ratio < 1.5, ratio
    else:
        assert ratio > 2.0, ratio

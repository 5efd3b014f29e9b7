"""Pretraining: the loss goes down, resuming is exact, exported files reproduce the trainer's layers."""
from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from spacy_elmo_mix.bilm import BiLMOptions, ElmoEmbedder, load_bilm
from spacy_elmo_mix.__main__ import main as cli_main
from spacy_elmo_mix.cli.pretrain import main as pretrain_main
from spacy_elmo_mix.pretrain import TrainConfig, Trainer
from spacy_elmo_mix.pretrain.batches import char_table, make_batch
from spacy_elmo_mix.pretrain.checkpoint import load_checkpoint
from spacy_elmo_mix.pretrain.data import prepare_data
from spacy_elmo_mix.pretrain.evaluate import unigram_perplexity
from spacy_elmo_mix.pretrain.export import export_model
from spacy_elmo_mix.pretrain.model import LanguageModel

TINY = {
    "lstm": {"dim": 24, "projection_dim": 8, "n_layers": 2, "cell_clip": 3, "proj_clip": 3, "use_skip_connections": True},
    "char_cnn": {"activation": "relu", "filters": [[1, 4], [2, 8]], "n_highway": 1, "embedding": {"dim": 4},
                 "n_characters": 262, "max_characters_per_token": 50},
}
SIZE_FLAGS = ["--lstm-dim", "24", "--projection-dim", "8", "--filters", "1:4,2:8", "--char-dim", "4"]
SUBJECTS = ["the cat", "a dog", "my friend", "the old man", "our teacher"]
VERBS = ["sees", "likes", "finds", "calls"]
OBJECTS = ["the ball .", "a red house .", "her brother .", "the city !"]


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture()
def corpus(tmp_path) -> tuple:
    """(train file, held-out file) of a small, very regular language."""
    rng = random.Random(0)
    def lines(n):
        return "\n".join(f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}" for _ in range(n)) + "\n"
    train, heldout = tmp_path / "train.txt", tmp_path / "heldout.txt"
    train.write_text(lines(200), encoding="utf-8")
    heldout.write_text(lines(20), encoding="utf-8")
    return train, heldout


def make_trainer(corpus, output: Path, **config) -> Trainer:
    data = prepare_data([corpus[0]], [corpus[1]], max_len=8, min_count=1)
    settings = {"tokens_per_batch": 120, "lr": 1e-2, "warmup_steps": 2, "eval_every": 0, "checkpoint_every": 0, "seed": 3}
    cfg = TrainConfig(**{**settings, **config})
    torch.manual_seed(cfg.seed)
    model = LanguageModel(BiLMOptions.from_dict(TINY), len(data.vocab), dropout=cfg.dropout)
    return Trainer(model, data, cfg, output)


def test_a_few_steps_lower_the_loss(corpus, tmp_path):
    trainer = make_trainer(corpus, tmp_path / "run", max_steps=40)
    summary = trainer.train(progress=False)
    losses = np.array([(r[1] + r[2]) / 2 for r in trainer.history["train"]])
    assert losses[-5:].mean() < losses[:5].mean() - 0.5
    unigram = unigram_perplexity(trainer.data.train, trainer.data.heldout, trainer.data.type_to_vocab, len(trainer.data.vocab))
    assert summary["heldout_forward_ppl"] < unigram and summary["heldout_backward_ppl"] < unigram


def test_resume_continues_identically(corpus, tmp_path):
    straight = make_trainer(corpus, tmp_path / "straight", max_steps=12, checkpoint_every=5)
    straight.train(progress=False)

    first = make_trainer(corpus, tmp_path / "split", max_steps=5)
    first.train(progress=False)
    resumed = make_trainer(corpus, tmp_path / "split", max_steps=12)
    resumed.load_state_dict(load_checkpoint(first.checkpoint_path))
    resumed.train(progress=False)

    assert [r[:4] for r in resumed.history["train"]] == [r[:4] for r in straight.history["train"]]
    for (name, a), b in zip(straight.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(a, b), name


def test_stops_after_epochs_and_time_budget(corpus, tmp_path):
    assert make_trainer(corpus, tmp_path / "a", max_epochs=1).train(progress=False)["epoch"] == 1
    assert make_trainer(corpus, tmp_path / "b", max_minutes=0.0).train(progress=False)["steps"] == 0


def unpack(rows: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Packed rows of a batch -> ``[batch, max_len, dim]`` in the batch's own order."""
    layout = pack_padded_sequence(torch.zeros(len(lengths), int(lengths.max())), lengths, batch_first=True, enforce_sorted=False)
    padded, _ = pad_packed_sequence(PackedSequence(rows, layout.batch_sizes, layout.sorted_indices, layout.unsorted_indices), batch_first=True)
    return padded


def trainer_layers(model: LanguageModel, sentences) -> list:
    """ELMo layers of ``sentences`` computed by the trainer's own forward pass (eval mode)."""
    types = ["<S>", "</S>"] + sorted({w for s in sentences for w in s})
    ids = {t: i for i, t in enumerate(types)}
    batch = make_batch([np.array([ids[w] for w in s]) for s in sentences], char_table(types), np.zeros(len(types), np.int64))
    model.eval()
    with torch.no_grad():
        forward, backward = model.encode(batch)
    out = []
    for i, sentence in enumerate(sentences):
        n = len(sentence)
        layers = [
            torch.cat([unpack(f, batch.lengths)[i, 1 : n + 1], unpack(b, batch.lengths)[i, : n + 2].flip(0)[1 : n + 1]], dim=-1)
            for f, b in zip(forward, backward)
        ]
        out.append(torch.stack(layers).numpy())
    return out


@pytest.mark.parametrize("n_layers", [2, 1])
def test_exported_files_reproduce_the_trainer_layers(corpus, tmp_path, n_layers):
    trainer = make_trainer(corpus, tmp_path / "run", max_steps=3)
    trainer.train(progress=False)
    export_model(trainer.model.bilm, trainer.data.vocab, tmp_path / "out", n_layers=n_layers)
    sentences = [["the", "cat", "sees", "a", "red", "house", "."], ["unseen", "words"], ["x"]]
    expected = trainer_layers(trainer.model, sentences)
    embedder = ElmoEmbedder(tmp_path / "out" / "options.json", tmp_path / "out" / "weights.hdf5")
    assert embedder.n_layers == n_layers + 1
    for got, want in zip(embedder.embed_batch(sentences), expected):
        np.testing.assert_allclose(got, want[: n_layers + 1], atol=1e-6)
    assert load_bilm(tmp_path / "out" / "options.json", tmp_path / "out" / "weights.hdf5").options.lstm.n_layers == n_layers
    assert (tmp_path / "out" / "vocab.txt").read_text(encoding="utf-8").split("\n")[:3] == ["<S>", "</S>", "<UNK>"]


def test_cli_trains_resumes_and_exports(corpus, tmp_path, capsys):
    out = tmp_path / "cli"
    common = [str(corpus[0]), "--heldout", str(corpus[1]), "--output", str(out), "--no-progress"]
    assert pretrain_main(common + SIZE_FLAGS + ["--min-count", "1", "--max-steps", "3", "--batch-tokens", "200", "--export-layers", "1"]) == 0
    assert load_checkpoint(out / "checkpoint.pt")["position"]["step"] == 3
    assert pretrain_main(common + ["--resume", "--max-steps", "5"]) == 0
    assert load_checkpoint(out / "checkpoint.pt")["position"]["step"] == 5
    for name in ("options.json", "weights.hdf5", "vocab.txt", "MODEL_CARD.md", "training_curve.png"):
        assert (out / name).is_file(), name
    card = (out / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "unigram" in card and "5 steps" in card
    assert "held-out perplexity: forward" in capsys.readouterr().out


def test_cli_resume_without_checkpoint_is_a_clear_error(corpus, tmp_path, capsys):
    assert cli_main(["pretrain", str(corpus[0]), "--output", str(tmp_path / "none"), "--resume", "--no-progress"]) == 1
    assert "No checkpoint to resume from" in capsys.readouterr().err


def test_cli_takes_the_size_from_an_options_file(corpus, tmp_path):
    options = tmp_path / "options.json"
    BiLMOptions.from_dict({**TINY, "lstm": {**TINY["lstm"], "n_layers": 1}}).to_file(options)
    out = tmp_path / "sized"
    args = [str(corpus[0]), "--output", str(out), "--options", str(options), "--max-steps", "2", "--no-progress"]
    assert pretrain_main(args) == 0
    assert BiLMOptions.from_file(out / "options.json") == BiLMOptions.from_file(options)

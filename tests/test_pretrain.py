"""Pretraining: the loss goes down, resuming is exact, exported files reproduce the trainer's layers."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from spacy_elmo_mix.__main__ import main as cli_main
from spacy_elmo_mix.bilm import BiLMOptions, ElmoEmbedder, load_bilm
from spacy_elmo_mix.cli.pretrain import main as pretrain_main
from spacy_elmo_mix.errors import ElmoInputError
from spacy_elmo_mix.pretrain import TrainConfig, Trainer
from spacy_elmo_mix.pretrain.batches import char_table, make_batch
from spacy_elmo_mix.pretrain.checkpoint import load_checkpoint
from spacy_elmo_mix.pretrain.data import prepare_data
from spacy_elmo_mix.pretrain.evaluate import unigram_perplexity
from spacy_elmo_mix.pretrain.export import export_model
from spacy_elmo_mix.pretrain.model import LanguageModel
from spacy_elmo_mix.pretrain.schedule import warmup_inverse_sqrt

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
    settings = {
        "tokens_per_batch": 120,
        "lr": 1e-2,
        "warmup_steps": 2,
        "eval_every": 0,
        "checkpoint_every": 0,
        "seed": 3,
    }
    cfg = TrainConfig(**{**settings, **config})
    torch.manual_seed(cfg.seed)
    model = LanguageModel(BiLMOptions.from_dict(TINY), len(data.vocab), dropout=cfg.dropout)
    return Trainer(model, data, cfg, output)


def test_a_few_steps_lower_the_loss(corpus, tmp_path):
    trainer = make_trainer(corpus, tmp_path / "run", max_steps=40)
    summary = trainer.train(progress=False)
    losses = np.array([(r[1] + r[2]) / 2 for r in trainer.history["train"]])
    assert losses[-5:].mean() < losses[:5].mean() - 0.5
    unigram = unigram_perplexity(trainer.data.train_counts(), trainer.data.heldout_counts())
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


def test_cooldown_falls_linearly_to_the_last_step():
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = warmup_inverse_sqrt(optimizer, warmup_steps=4, cooldown_steps=4, max_steps=10)
    rates = []
    for _ in range(10):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    inverse_sqrt = [1 / 4, 2 / 4, 3 / 4] + [(4 / i) ** 0.5 for i in range(4, 11)]
    cooldown = [1] * 7 + [3 / 4, 2 / 4, 1 / 4]
    assert rates == pytest.approx([a * b for a, b in zip(inverse_sqrt, cooldown)], rel=1e-12)
    with pytest.raises(ValueError, match="needs max_steps"):
        warmup_inverse_sqrt(optimizer, warmup_steps=4, cooldown_steps=4)


def test_resuming_with_a_cooldown_equals_a_run_planned_with_it(corpus, tmp_path):
    """A run may be given its cooldown only when it is resumed for the last time."""
    straight = make_trainer(corpus, tmp_path / "straight", max_steps=9, cooldown_steps=5)
    straight.train(progress=False)
    first = make_trainer(corpus, tmp_path / "split", max_steps=5)
    first.train(progress=False)
    resumed = make_trainer(corpus, tmp_path / "split", max_steps=9, cooldown_steps=5)
    resumed.load_state_dict(load_checkpoint(first.checkpoint_path))
    resumed.train(progress=False)
    assert [r[:4] for r in resumed.history["train"]] == [r[:4] for r in straight.history["train"]]
    for (name, a), b in zip(straight.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(a, b), name
    without = make_trainer(corpus, tmp_path / "without", max_steps=9)
    without.train(progress=False)
    assert [r[:4] for r in without.history["train"][:5]] == [r[:4] for r in straight.history["train"][:5]]
    assert without.history["train"][5:] != straight.history["train"][5:]  # the cooldown took effect


def test_stops_after_epochs_and_time_budget(corpus, tmp_path):
    assert make_trainer(corpus, tmp_path / "a", max_epochs=1).train(progress=False)["epoch"] == 1
    assert make_trainer(corpus, tmp_path / "b", max_minutes=0.0).train(progress=False)["steps"] == 0


def unpack(rows: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Packed rows of a batch -> ``[batch, max_len, dim]`` in the batch's own order."""
    layout = pack_padded_sequence(
        torch.zeros(len(lengths), int(lengths.max())), lengths, batch_first=True, enforce_sorted=False
    )
    padded, _ = pad_packed_sequence(
        PackedSequence(rows, layout.batch_sizes, layout.sorted_indices, layout.unsorted_indices), batch_first=True
    )
    return padded


def trainer_layers(model: LanguageModel, sentences) -> list:
    """ELMo layers of ``sentences`` computed by the trainer's own forward pass (eval mode)."""
    types = ["<S>", "</S>"] + sorted({w for s in sentences for w in s})
    ids = {t: i for i, t in enumerate(types)}
    batch = make_batch(
        [np.array([ids[w] for w in s]) for s in sentences], char_table(types), np.zeros(len(types), np.int64)
    )
    model.eval()
    with torch.no_grad():
        forward, backward = model.encode(batch)
    out = []
    for i, sentence in enumerate(sentences):
        n = len(sentence)
        layers = [
            torch.cat(
                [unpack(f, batch.lengths)[i, 1 : n + 1], unpack(b, batch.lengths)[i, : n + 2].flip(0)[1 : n + 1]],
                dim=-1,
            )
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
    assert (
        load_bilm(tmp_path / "out" / "options.json", tmp_path / "out" / "weights.hdf5").options.lstm.n_layers
        == n_layers
    )
    assert (tmp_path / "out" / "vocab.txt").read_text(encoding="utf-8").split("\n")[:3] == ["<S>", "</S>", "<UNK>"]


def test_cli_trains_resumes_and_exports(corpus, tmp_path, capsys):
    out = tmp_path / "cli"
    common = [str(corpus[0]), "--heldout", str(corpus[1]), "--output", str(out), "--no-progress"]
    assert (
        pretrain_main(
            common
            + SIZE_FLAGS
            + ["--min-count", "1", "--max-steps", "3", "--batch-tokens", "200", "--export-layers", "1"]
        )
        == 0
    )
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


def test_cli_starts_from_given_weights(corpus, tmp_path, capsys):
    """--init-weights: the biLM starts from an exported model (here: one step at a negligible learning
    rate leaves it within float32 rounding of the start); a model of another size is a clear error."""
    first = tmp_path / "first"
    common = [str(corpus[0]), "--no-progress", "--min-count", "1", "--max-steps", "1"]
    assert pretrain_main(common + SIZE_FLAGS + ["--output", str(first), "--lr", "0.1"]) == 0
    start = load_bilm(first / "options.json", first / "weights.hdf5").state_dict()
    warm = tmp_path / "warm"
    args = common + [
        "--output",
        str(warm),
        "--options",
        str(first / "options.json"),
        "--init-weights",
        str(first / "weights.hdf5"),
        "--lr",
        "1e-12",
    ]
    assert pretrain_main(args) == 0
    for name, value in load_bilm(warm / "options.json", warm / "weights.hdf5").state_dict().items():
        torch.testing.assert_close(value, start[name], rtol=0, atol=1e-6, msg=name)
    assert f"Started from the biLM weights `{first / 'weights.hdf5'}`" in (warm / "MODEL_CARD.md").read_text(
        encoding="utf-8"
    )
    cold = tmp_path / "cold"
    assert pretrain_main(common + SIZE_FLAGS + ["--output", str(cold), "--lr", "1e-12", "--seed", "1"]) == 0
    differs = load_bilm(cold / "options.json", cold / "weights.hdf5").state_dict()
    assert any((differs[name] - start[name]).abs().max() > 1e-3 for name in start)
    code, err = run_cli(
        common
        + [
            "--output",
            tmp_path / "other",
            "--lstm-dim",
            "32",
            "--projection-dim",
            "8",
            "--filters",
            "1:4,2:8",
            "--char-dim",
            "4",
            "--init-weights",
            first / "weights.hdf5",
        ],
        capsys,
    )
    assert (
        code == 1 and err.startswith("error: ") and "weights.hdf5" in err and "expected" in err and err.count("\n") == 1
    ), err
    code, err = run_cli([corpus[0], "--output", warm, "--resume", "--init-weights", first / "weights.hdf5"], capsys)
    assert code == 1 and "--init-weights cannot be given with it" in err, err


def run_cli(args, capsys) -> tuple:
    """(exit status, stderr) of ``python -m spacy_elmo_mix pretrain ARGS`` run in this process."""
    code = cli_main(["pretrain", *map(str, args)])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--max-steps", "-1", "--max-steps must be an integer of at least 1, got -1"),
        ("--max-steps", "0", "--max-steps must be an integer of at least 1, got 0"),
        ("--batch-tokens", "0", "--batch-tokens must be an integer of at least 1"),
        ("--max-len", "0", "--max-len must be an integer of at least 1"),
        ("--lstm-dim", "0", "--lstm-dim must be an integer of at least 1"),
        ("--max-vocab", "3", "--max-vocab must be an integer of at least 4"),
        ("--seed", "-5", "--seed must be an integer of at least 0"),
        ("--eval-every", "-1", "--eval-every must be an integer of at least 0"),
        ("--threads", "0", "--threads must be an integer of at least 1"),
        ("--cooldown", "-1", "--cooldown must be an integer of at least 0, got -1"),
        ("--cooldown", "3", "--cooldown 3 is longer than the run (--max-steps 2)"),
        ("--lr", "nan", "--lr must be a finite number above 0, got nan"),
        ("--lr", "0", "--lr must be a finite number above 0"),
        ("--max-minutes", "inf", "--max-minutes must be a finite number above 0"),
        ("--clip-norm", "-1", "--clip-norm must be a finite number above 0"),
        ("--dropout", "1", "--dropout must be at least 0 and below 1, got 1.0"),
        ("--clip", "-3", "--clip must be a finite number of at least 0"),
        ("--device", "tpu", "--device must be cpu, cuda or cuda:N, got 'tpu'"),
        ("--encoding", "klingon", "Unknown text encoding 'klingon'"),
        ("--vocab", "missing_vocab.txt", "Vocabulary file not found: missing_vocab.txt"),
        ("--card-notes", "missing_notes.md", "--card-notes file not found: missing_notes.md"),
        ("--export-layers", "2", "--export-layers 2: the model has only 1 LSTM layer(s)"),
        ("--init-weights", "missing_weights.hdf5", "missing_weights.hdf5"),
    ],
)
def test_cli_rejects_bad_settings_before_training(corpus, tmp_path, capsys, flag, value, message):
    out = tmp_path / "out"
    extra = ["--n-layers", "1"] if flag == "--export-layers" else []
    code, err = run_cli(
        [corpus[0], "--output", out, "--no-progress", "--max-steps", "2"] + SIZE_FLAGS + extra + [flag, value], capsys
    )
    assert code == 1 and err.startswith("error: ") and message in err and err.count("\n") == 1, err
    assert not (out / "checkpoint.pt").exists() and not (out / "weights.hdf5").exists()
    assert not out.exists() or flag in ("--vocab", "--export-layers"), "output created before the settings were checked"


def test_cli_refuses_to_replace_a_trained_model_without_consent(corpus, tmp_path, capsys):
    out = tmp_path / "model"
    args = [corpus[0], "--output", out, "--no-progress", "--max-steps", "2", "--min-count", "1"] + SIZE_FLAGS
    assert run_cli(args, capsys)[0] == 0
    weights = (out / "weights.hdf5").read_bytes()
    code, err = run_cli(args, capsys)
    assert (
        code == 1
        and "is not empty (MODEL_CARD.md, checkpoint.pt, options.json, training_curve.png, ...)" in err
        and "--overwrite" in err
    )
    assert (out / "weights.hdf5").read_bytes() == weights
    assert run_cli(args + ["--overwrite", "--seed", "7"], capsys)[0] == 0
    assert (out / "weights.hdf5").read_bytes() != weights
    code, err = run_cli([corpus[0], "--output", out, "--resume", "--no-progress", "--lstm-dim", "64"], capsys)
    assert code == 1 and "--lstm-dim cannot be given with it" in err
    code, err = run_cli([corpus[0], "--output", out, "--resume", "--no-progress", "--lr", "0.5"], capsys)
    assert code == 1 and "--lr 0.5 (checkpoint: 0.0015)" in err


def test_cli_output_that_is_a_file_or_unwritable_fails_before_training(corpus, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    code, err = run_cli([corpus[0], "--output", blocker, "--no-progress", "--max-steps", "2"] + SIZE_FLAGS, capsys)
    assert code == 1 and "is a file, not a directory" in err
    code, err = run_cli(
        [corpus[0], "--output", blocker / "sub", "--no-progress", "--max-steps", "2"] + SIZE_FLAGS, capsys
    )
    assert code == 1 and err.startswith("error: ") and "Traceback" not in err
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders: the permission case cannot be tested as root")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        code, err = run_cli([corpus[0], "--output", locked, "--no-progress", "--max-steps", "2"] + SIZE_FLAGS, capsys)
    finally:
        locked.chmod(0o755)
    assert code == 1 and "is not writable" in err


def test_cli_uses_a_given_vocabulary(corpus, tmp_path, capsys):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("<S>\n</S>\n<UNK>\nthe\ncat\n.\n", encoding="utf-8")
    out = tmp_path / "out"
    assert (
        run_cli(
            [corpus[0], "--output", out, "--no-progress", "--max-steps", "2", "--vocab", vocab] + SIZE_FLAGS, capsys
        )[0]
        == 0
    )
    assert (out / "vocab.txt").read_text(encoding="utf-8") == vocab.read_text(encoding="utf-8")
    vocab.write_text("<S>\n</S>\n<UNK>\nthe\nthe\n", encoding="utf-8")
    code, err = run_cli(
        [corpus[0], "--output", tmp_path / "o2", "--no-progress", "--max-steps", "2", "--vocab", vocab] + SIZE_FLAGS,
        capsys,
    )
    assert code == 1 and "the word 'the' appears twice (entries 4 and 5)" in err


def test_bfloat16_training_path_lowers_the_loss(corpus, tmp_path):
    """The CUDA path's bfloat16 matrix products (run here on CPU): trains, weights stay float32."""
    trainer = make_trainer(corpus, tmp_path / "run", max_steps=30)
    trainer.bf16 = True
    trainer.model.bilm.set_compute_dtype(torch.bfloat16)
    trainer.train(progress=False)
    losses = np.array([(r[1] + r[2]) / 2 for r in trainer.history["train"]])
    assert losses[-5:].mean() < losses[:5].mean() - 0.5
    assert all(p.dtype == torch.float32 for p in trainer.model.parameters())


def test_cli_usage_errors_are_one_line(corpus, tmp_path, capsys):
    code, err = run_cli([corpus[0], "--output", tmp_path / "o", "--max-steps", "many"], capsys)
    assert code == 1 and "argument --max-steps: invalid int value: 'many'" in err and err.count("\n") == 1
    code, err = run_cli([corpus[0]], capsys)
    assert code == 1 and "the following arguments are required: --output" in err


def test_cli_resume_from_a_foreign_checkpoint_is_a_clear_error(corpus, tmp_path, capsys):
    out = tmp_path / "foreign"
    out.mkdir()
    torch.save({"model": {}}, out / "checkpoint.pt")
    code, err = run_cli([corpus[0], "--output", out, "--resume", "--no-progress"], capsys)
    assert code == 1 and "is not a pretraining checkpoint of this version: missing config, data" in err


def test_cli_cooldown_needs_a_run_length_and_may_be_added_on_resume(corpus, tmp_path, capsys):
    out = tmp_path / "out"
    base = [corpus[0], "--output", out, "--no-progress", "--min-count", "1"] + SIZE_FLAGS
    code, err = run_cli(base + ["--max-minutes", "1", "--cooldown", "2"], capsys)
    assert code == 1 and "--cooldown 2 needs --max-steps" in err and not out.exists()
    assert run_cli(base + ["--max-steps", "2"], capsys)[0] == 0
    code, err = run_cli(
        [corpus[0], "--output", out, "--no-progress", "--resume", "--max-steps", "4", "--cooldown", "2"], capsys
    )
    assert code == 0, err
    state = load_checkpoint(out / "checkpoint.pt")
    assert state["config"]["cooldown_steps"] == 2 and state["position"]["step"] == 4
    assert "falling linearly towards 0 over the last 2 steps" in (out / "MODEL_CARD.md").read_text(encoding="utf-8")


def test_cli_resume_with_longer_windows_starts_the_next_epoch_and_keeps_the_heldout_windows(corpus, tmp_path, capsys):
    """A model trained on short windows fails on longer sequences: --max-len may grow on --resume."""

    def with_a_long_line(path, n):
        text = path.read_text(encoding="utf-8")
        longer = tmp_path / f"long_{path.name}"
        longer.write_text(" ".join(text.split("\n")[:n]) + "\n" + text, encoding="utf-8")
        return longer

    out = tmp_path / "out"
    base = [
        with_a_long_line(corpus[0], 30),
        "--heldout",
        with_a_long_line(corpus[1], 8),
        "--output",
        out,
        "--no-progress",
    ]
    assert (
        run_cli(
            base + SIZE_FLAGS + ["--min-count", "1", "--max-steps", "3", "--max-len", "8", "--batch-tokens", "60"],
            capsys,
        )[0]
        == 0
    )
    first = load_checkpoint(out / "checkpoint.pt")
    assert first["position"]["epoch"] == 0 and first["position"]["batch_in_epoch"] == 3
    code, err = run_cli(base + ["--resume", "--max-steps", "5", "--max-len", "64"], capsys)
    assert code == 0, err
    state = load_checkpoint(out / "checkpoint.pt")
    assert state["config"]["max_len"] == 64 and state["config"]["heldout_max_len"] == 8
    assert state["history"]["windows"] == [[0, 8], [3, 64]]
    assert state["position"] == {"step": 5, "epoch": 1, "batch_in_epoch": 2}
    assert [row[0] for row in state["history"]["heldout"]] == [3, 5]
    assert [row[0] for row in state["history"]["heldout_as_trained"]] == [5]  # the held-out text in windows of 64
    assert state["history"]["heldout_as_trained"][0][1:3] != state["history"]["heldout"][1][1:3]
    card = (out / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert (
        "Windows of at most 8 tokens, then of at most 64 tokens from step 3" in card
        and "held-out windows of at most 8 tokens" in card
    )
    assert "On the held-out text in windows of at most 64 tokens as in training" in card
    code, err = run_cli(base + ["--resume", "--max-steps", "6", "--max-len", "64", "--warmup", "9"], capsys)
    assert code == 1 and "only the stop flags, --cooldown and --max-len may change: --warmup 9 (checkpoint: 200)" in err


def test_resumed_windows_are_cut_at_the_new_length(corpus, tmp_path):
    first = make_trainer(corpus, tmp_path / "run", max_steps=2, max_len=8)
    first.train(progress=False)
    data = prepare_data([corpus[0]], [corpus[1]], max_len=3, min_count=1, heldout_max_len=8, vocab=first.data.vocab)
    cfg = TrainConfig(**{**first.config.to_dict(), "max_len": 3, "heldout_max_len": 8, "max_steps": 4})
    resumed = Trainer(LanguageModel(BiLMOptions.from_dict(TINY), len(data.vocab)), data, cfg, tmp_path / "run")
    resumed.load_state_dict(load_checkpoint(first.checkpoint_path))
    assert (resumed.epoch, resumed.batch_in_epoch) == (1, 0) and resumed.history["windows"] == [[0, 8], [2, 3]]
    assert max(map(len, data.train)) == 3 and max(map(len, data.heldout)) > 3
    assert all(len(e) <= 3 for batch in [next(resumed._batches())] for e in batch)
    resumed.train(progress=False)
    assert resumed.step == 4
    other = prepare_data([corpus[1]], [], max_len=3, min_count=1, vocab=first.data.vocab)
    with pytest.raises(ElmoInputError, match="other data"):
        Trainer(
            LanguageModel(BiLMOptions.from_dict(TINY), len(other.vocab)), other, cfg, tmp_path / "other"
        ).load_state_dict(load_checkpoint(first.checkpoint_path))

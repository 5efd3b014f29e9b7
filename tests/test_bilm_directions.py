"""The two directions of a layer run concurrently at inference (two torch threads or more): each
direction must compute exactly what it computes alone."""
from __future__ import annotations

import pytest
import torch

from spacy_elmo_mix.bilm import batch_to_char_ids
from spacy_elmo_mix.bilm.loading import load_bilm

SENTENCES = [["The", "bank", "raised", "its", "rates", "."], ["A", "b"], [], ["Ünïcode", "🙂", "x" * 60, "end"] * 5]


@pytest.fixture()
def model(tiny_model_files):
    return load_bilm(*tiny_model_files)


def _layers(model, concurrent: bool, threads: int, mode=torch.inference_mode):
    ids = torch.from_numpy(batch_to_char_ids(SENTENCES))
    lengths = torch.tensor([len(s) for s in SENTENCES])
    model.concurrent_directions = concurrent
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with mode():
            return model(ids, lengths), torch.get_num_threads()
    finally:
        torch.set_num_threads(previous)


@pytest.mark.parametrize("mode", [torch.inference_mode, torch.no_grad])
def test_each_direction_computes_exactly_what_it_computes_alone(model, mode):
    from spacy_elmo_mix.bilm.modules import run_directions

    torch.manual_seed(0)
    x, batch_sizes = torch.randn(20, model.options.lstm.projection_dim), [4, 4, 3, 3, 2, 2, 1, 1]
    forward = lambda: model.stacks[0][0](x, batch_sizes)  # noqa: E731
    backward = lambda: model.stacks[1][0](x.flip(0), batch_sizes)  # noqa: E731
    previous = torch.get_num_threads()
    try:
        with mode():
            torch.set_num_threads(1)
            alone = forward(), backward()
            torch.set_num_threads(2)
            together = run_directions(forward, backward, concurrent=True)
            assert torch.get_num_threads() == 2  # the caller's thread count is restored
    finally:
        torch.set_num_threads(previous)
    assert torch.equal(alone[0], together[0]) and torch.equal(alone[1], together[1])


def test_concurrent_model_equals_sequential_model(model):
    # Only the char-CNN's thread count differs between the two (float32 GEMM grouping): ~1e-6 here.
    sequential, _ = _layers(model, concurrent=False, threads=2)
    concurrent, _ = _layers(model, concurrent=True, threads=2)
    torch.testing.assert_close(concurrent, sequential, atol=1e-5, rtol=0)


def test_concurrent_directions_are_used_only_where_they_can_pay(model, monkeypatch):
    from spacy_elmo_mix.bilm import modules

    calls = []
    original = modules.run_directions
    monkeypatch.setattr(modules, "run_directions", lambda f, b, concurrent: calls.append(concurrent) or original(f, b, concurrent))
    _layers(model, concurrent=True, threads=2)
    _layers(model, concurrent=True, threads=1)
    _layers(model, concurrent=False, threads=2)
    assert calls == [True, True, False, False, False, False]  # 2 LSTM layers per call


def test_training_keeps_the_sequential_path_and_its_gradients(model):
    ids = torch.from_numpy(batch_to_char_ids(SENTENCES[:2]))
    lengths = torch.tensor([len(s) for s in SENTENCES[:2]])
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        model.train()
        model(ids, lengths).sum().backward()
    finally:
        torch.set_num_threads(previous)
    grads = [layer.w_recurrent.grad for stack in model.stacks for layer in stack]
    assert all(g is not None and g.abs().sum() > 0 for g in grads)

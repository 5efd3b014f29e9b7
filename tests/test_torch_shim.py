"""``TorchShim``: optimizer steps change the torch parameters in place, as thinc's ``PyTorchShim``
would change their values, without a growing chain of tensors and with torch told of the change."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import spacy
import torch
from thinc.api import Adam, PyTorchShim

from elmo_testing import conll_examples, small_config
from spacy_elmo_mix.layers.torch_shim import TorchShim


def _stepped(shim_class, steps: int):
    """A linear module after ``steps`` Adam steps through ``shim_class`` on fixed gradients."""
    torch.manual_seed(0)
    module = torch.nn.Linear(6, 4)
    shim = shim_class(module)
    optimizer = Adam(0.01, grad_clip=1.0)
    generator = torch.Generator().manual_seed(1)
    for _ in range(steps):
        module.weight.grad = torch.randn(4, 6, generator=generator)
        module.bias.grad = torch.randn(4, generator=generator)
        shim.finish_update(optimizer)
    return module


def test_steps_equal_thinc_pytorch_shim():
    ours, thincs = _stepped(TorchShim, 3), _stepped(PyTorchShim, 3)
    for name, param in ours.named_parameters():
        assert torch.equal(param, dict(thincs.named_parameters())[name])
        assert param.grad is not None and not param.grad.any()


class _Counting(torch.nn.Linear):
    """A module that counts the shim's ``weights_changed`` calls."""

    changes = 0

    def weights_changed(self) -> None:
        self.changes += 1


def test_step_keeps_the_tensor_and_tells_the_module():
    torch.manual_seed(0)
    module = _Counting(6, 4)
    shim = TorchShim(module)
    optimizer = Adam(0.01)
    pointer, before = module.weight.data_ptr(), module.weight.detach().clone()
    shim.finish_update(optimizer)  # no gradients yet: no step
    assert module.changes == 0
    module.weight.grad = torch.ones(4, 6)
    module.bias.grad = torch.ones(4)
    shim.finish_update(optimizer)
    assert module.weight.data_ptr() == pointer and not torch.equal(module.weight, before)
    assert module.changes == 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps_rollup")
def test_steps_do_not_grow_the_process():
    """thinc's shim grew this loop by about 0.7 MB a step (a [400, 768] weight: 212 MB here)."""

    def anonymous_mib() -> float:
        with open("/proc/self/smaps_rollup") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("Anonymous")) / 1024

    module = torch.nn.Linear(768, 400)
    shim, optimizer, x = TorchShim(module), Adam(0.001), torch.randn(8, 768)
    for step in range(350):
        if step == 50:  # after the allocator's and the optimizer's first allocations
            start = anonymous_mib()
        module(x).sum().backward()
        shim.finish_update(optimizer)
    assert anonymous_mib() - start < 24


def test_fine_tuned_bfloat16_bilm_predicts_with_its_new_weights(tiny_model_files, data_dir):
    """The biLM keeps bfloat16 copies of its weights per weight version at prediction: after a
    fine-tuning step it must predict as a fresh copy of the tuned pipeline does, not as before."""
    config = small_config("ner.cfg", *tiny_model_files, frozen=False, cache_memory_mb=0)
    config["components"]["elmo"]["model"]["compute_dtype"] = "bfloat16"
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    examples = conll_examples(data_dir / "conll2003" / "train.txt", 8, nlp)
    nlp.initialize(lambda: examples)
    elmo = nlp.get_pipe("elmo")
    docs = [eg.predicted for eg in examples]
    before = elmo.predict(docs)
    optimizer = Adam(0.05)
    for _ in range(4):  # the parser's zero-initialized output layer passes no gradient at first
        nlp.update(examples, sgd=optimizer)
    after = elmo.predict(docs)
    fresh = spacy.util.load_model_from_config(nlp.config, auto_fill=True).from_bytes(nlp.to_bytes())
    expected = fresh.get_pipe("elmo").predict(docs)
    assert any(not np.array_equal(a, b) for a, b in zip(before, expected))
    for a, b in zip(after, expected):
        np.testing.assert_array_equal(a, b)

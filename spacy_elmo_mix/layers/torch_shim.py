"""``TorchShim``: thinc's ``PyTorchShim`` whose optimizer steps keep each parameter's tensor.

thinc's ``PyTorchShim.finish_update`` gives the optimizer a numpy (or cupy) view of each parameter,
which the optimizer updates in place, and then sets the parameter's data to a new tensor over the
returned array (``param.data = xp2torch(...)``). On the CPU two things go wrong with that:

- each new tensor keeps the one before it alive through numpy's chain of views, and the process
  grows with every step (a BiLSTM-CRF training run on CoNLL-2003: docs/crf.md, "Memory", has the
  figures); ``tests/test_torch_shim.py`` measures it;
- torch never sees the weights change (same storage, same version counter), so whatever a module
  keeps per weight, such as the biLM's packed and bfloat16 copies of its weights, goes stale.

``TorchShim`` keeps each parameter's tensor (the optimizer's result is copied into it when the
optimizer did not update the view in place, as thinc's do) and, after a step, calls the module's
``weights_changed()`` if it has one (:meth:`~spacy_elmo_mix.bilm.BiLM.weights_changed`). It does not
move the version counters: spaCy runs a component's optimizer step before its listeners send their
gradients back, and torch would then refuse the backward pass through the weights the forward pass
saved.
"""

from __future__ import annotations

from typing import cast

import torch
from thinc.api import Optimizer, PyTorchShim, torch2xp, xp2torch
from thinc.types import FloatsXd


class TorchShim(PyTorchShim):
    """A ``PyTorchShim`` (same arguments, same serialization) with in-place optimizer steps."""

    def finish_update(self, optimizer: Optimizer) -> None:
        stepped = False
        for name, param in self._model.named_parameters():
            if param.grad is None:
                continue
            if not self._grad_scaler.found_inf:  # skip the step when a scaled gradient overflowed
                # float parameters: float arrays (cast as thinc's PyTorchShim.finish_update does)
                data = cast(FloatsXd, torch2xp(param.data))
                updated, _ = optimizer((self.id, name), data, cast(FloatsXd, torch2xp(param.grad)))
                if updated is not data:
                    with torch.no_grad():
                        param.data.copy_(xp2torch(updated, device=param.device))
                stepped = True
            param.grad.zero_()
        self._grad_scaler.update()
        weights_changed = getattr(self._model, "weights_changed", None)
        if stepped and weights_changed is not None:
            weights_changed()

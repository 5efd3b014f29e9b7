"""``TorchLayer``: a thinc layer around a torch module that is built once its sizes are known.

thinc's ``PyTorchWrapper`` needs the torch module at construction, but the sizes of a tagger's
layers are known only at ``initialize`` (the width of ELMo's layers, the number of tags). A
``TorchLayer`` builds its module (and its shim, a ``TorchShim``) as soon as every dim is set: in
``initialize``, or when ``from_bytes``/``from_disk`` restores the dims of a saved pipeline, which thinc
does for each layer before it loads the layer's shims, so a saved pipeline loads into a fresh one.
"""

from __future__ import annotations

from typing import Callable, Dict, Optional

from thinc.api import Model
from thinc.layers.pytorchwrapper import forward as pytorch_forward

from .torch_shim import TorchShim


class TorchLayer(Model):
    """A thinc layer that runs ``build(layer)``'s torch module; see the module docstring.

    name: the layer's name. build: makes the torch module from the layer's dims.
    dims: the layer's dims (``None`` = set at initialize). init: the thinc init function.
    convert_inputs, convert_outputs: thinc's ``PyTorchWrapper`` conversions (None: no forward pass
    through the shim; the owner calls ``module`` directly).
    """

    def __init__(
        self,
        name: str,
        build: Callable[["TorchLayer"], "object"],
        dims: Dict[str, Optional[int]],
        init: Callable,
        convert_inputs: Optional[Callable] = None,
        convert_outputs: Optional[Callable] = None,
        forward: Callable = pytorch_forward,
    ) -> None:
        attrs = {"convert_inputs": convert_inputs, "convert_outputs": convert_outputs}
        Model.__init__(self, name, forward, init=init, dims=dims, attrs=attrs)
        self._build = build
        self._build_if_ready()

    def set_dim(self, name: str, value: int, *, force: bool = False) -> None:
        Model.set_dim(self, name, value, force=force)
        self._build_if_ready()

    def _build_if_ready(self) -> None:
        if not self.shims and all(self.has_dim(dim) is True for dim in self.dim_names):
            self.shims.append(TorchShim(self._build(self)))


def torch_module(layer: Model):
    """The torch module of a ``TorchLayer`` (or of a copy of one); ValueError before it is built."""
    if not layer.shims:
        raise ValueError(f"The {layer.name} layer has no torch module yet: initialize the pipeline first")
    return layer.shims[0]._model

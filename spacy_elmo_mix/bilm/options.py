"""Typed, validated view of an ELMo ``options.json`` (bilm-tf / AllenNLP format)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import AbstractSet, Any, Dict, Tuple, Union

from ..errors import ElmoFileError


@dataclass(frozen=True)
class CharCNNOptions:
    """The character CNN that makes the context-free token vector (layer 0).

    filters: ``(width, n_filters)`` per convolution.
    n_highway: number of highway layers after the convolutions.
    char_embedding_dim: size of each character's embedding.
    n_characters: 261 (bilm-tf training files) or 262 (AllenNLP usage files); both load the same.
    max_characters_per_token: ids per token (50: 48 UTF-8 bytes plus word markers).
    activation: ``"relu"`` or ``"tanh"``, applied to each convolution after max-pooling over characters.
    """

    filters: Tuple[Tuple[int, int], ...]
    n_highway: int
    char_embedding_dim: int
    n_characters: int
    max_characters_per_token: int
    activation: str

    @property
    def n_filters(self) -> int:
        return sum(n for _, n in self.filters)


@dataclass(frozen=True)
class LSTMOptions:
    """The stacked LSTMs (one stack per direction).

    dim: memory cells per LSTM.
    projection_dim: size of each direction's output; layer vectors have ``2 * projection_dim``.
    n_layers: 1 or 2 LSTM layers per direction.
    cell_clip: clip value of the memory cell before ``tanh`` (0: no clipping).
    proj_clip: clip value of the projected output (0: no clipping).
    use_skip_connections: add each layer's input to its output, for layers above the first.
    """

    dim: int
    projection_dim: int
    n_layers: int
    cell_clip: float
    proj_clip: float
    use_skip_connections: bool


@dataclass(frozen=True)
class BiLMOptions:
    """Everything ``options.json`` says about a biLM."""

    char_cnn: CharCNNOptions
    lstm: LSTMOptions

    @property
    def output_dim(self) -> int:
        """Width of every ELMo layer vector (forward and backward halves)."""
        return 2 * self.lstm.projection_dim

    @property
    def n_output_layers(self) -> int:
        """Layer 0 (token vectors) plus one per LSTM layer."""
        return self.lstm.n_layers + 1

    def to_json_dict(self) -> Dict[str, Any]:
        """The ``options.json`` dictionary, in the layout bilm-tf and AllenNLP read."""
        c, lstm = self.char_cnn, self.lstm
        return {
            "lstm": {
                "dim": lstm.dim,
                "projection_dim": lstm.projection_dim,
                "n_layers": lstm.n_layers,
                "cell_clip": lstm.cell_clip,
                "proj_clip": lstm.proj_clip,
                "use_skip_connections": lstm.use_skip_connections,
            },
            "char_cnn": {
                "activation": c.activation,
                "filters": [list(f) for f in c.filters],
                "n_highway": c.n_highway,
                "embedding": {"dim": c.char_embedding_dim},
                "n_characters": c.n_characters,
                "max_characters_per_token": c.max_characters_per_token,
            },
        }

    @classmethod
    def from_dict(cls, data: Any, source: str = "<options>") -> "BiLMOptions":
        """Validate a parsed ``options.json``; errors name ``source`` and the key at fault."""
        reader = _Reader(source)
        top = reader.section(
            data,
            "",
            {"lstm", "char_cnn"},
            optional={
                "bidirectional",
                "dropout",
                "all_clip_norm_val",
                "n_epochs",
                "n_train_tokens",
                "batch_size",
                "n_tokens_vocab",
                "unroll_steps",
                "n_negative_samples_batch",
            },
        )
        lstm = reader.section(
            top["lstm"],
            "lstm",
            {"dim", "projection_dim", "n_layers"},
            optional={"cell_clip", "proj_clip", "use_skip_connections"},
        )
        cnn = reader.section(
            top["char_cnn"],
            "char_cnn",
            {"filters", "n_highway", "embedding", "n_characters", "max_characters_per_token", "activation"},
        )
        emb = reader.section(cnn["embedding"], "char_cnn.embedding", {"dim"})
        filters = cnn["filters"]
        if (
            not isinstance(filters, list)
            or not filters
            or not all(isinstance(f, list) and len(f) == 2 and all(_is_int(v) and v > 0 for v in f) for f in filters)
        ):
            raise reader.error(
                "char_cnn.filters", filters, "a non-empty list of [width, n_filters] pairs of positive integers"
            )
        char_cnn = CharCNNOptions(
            filters=tuple((int(w), int(n)) for w, n in filters),
            n_highway=reader.integer(cnn, "char_cnn.n_highway", minimum=0),
            char_embedding_dim=reader.integer(emb, "char_cnn.embedding.dim", minimum=1),
            n_characters=reader.choice(cnn, "char_cnn.n_characters", (261, 262)),
            max_characters_per_token=reader.integer(cnn, "char_cnn.max_characters_per_token", minimum=3),
            activation=reader.choice(cnn, "char_cnn.activation", ("relu", "tanh")),
        )
        width = max(w for w, _ in char_cnn.filters)
        if width > char_cnn.max_characters_per_token:
            raise reader.error(
                "char_cnn.filters",
                filters,
                f"filter widths of at most max_characters_per_token ({char_cnn.max_characters_per_token})",
            )
        lstm_opts = LSTMOptions(
            dim=reader.integer(lstm, "lstm.dim", minimum=1),
            projection_dim=reader.integer(lstm, "lstm.projection_dim", minimum=1),
            n_layers=reader.choice(lstm, "lstm.n_layers", (1, 2)),
            cell_clip=reader.number(lstm, "lstm.cell_clip", default=0.0),
            proj_clip=reader.number(lstm, "lstm.proj_clip", default=0.0),
            use_skip_connections=reader.boolean(lstm, "lstm.use_skip_connections", default=True),
        )
        return cls(char_cnn=char_cnn, lstm=lstm_opts)

    @classmethod
    def from_file(cls, path: Union[str, Path]) -> "BiLMOptions":
        """Read and validate an ``options.json`` file."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ElmoFileError(f"ELMo options file not found: {path}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ElmoFileError(f"Cannot read ELMo options file {path}: {exc}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ElmoFileError(f"ELMo options file {path} is not valid JSON: {exc}") from None
        return cls.from_dict(data, source=str(path))

    def to_file(self, path: Union[str, Path]) -> None:
        """Write ``options.json`` atomically (temp file, then rename)."""
        from ..atomic import atomic_write

        with atomic_write(Path(path)) as tmp:
            tmp.write_text(json.dumps(self.to_json_dict(), indent=2) + "\n", encoding="utf-8")

    def __str__(self) -> str:  # pragma: no cover - convenience
        return json.dumps(asdict(self))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _Reader:
    """Key-by-key validation that names the file and the dotted key at fault."""

    def __init__(self, source: str):
        self.source = source

    def error(self, key: str, value: Any, expected: str) -> ElmoFileError:
        return ElmoFileError(f"Invalid ELMo options in {self.source}: key '{key}' is {value!r}, expected {expected}")

    def section(
        self, data: Any, name: str, required: AbstractSet[str], optional: AbstractSet[str] = frozenset()
    ) -> Dict[str, Any]:
        where = f"section '{name}'" if name else "the top level"
        if not isinstance(data, dict):
            raise ElmoFileError(
                f"Invalid ELMo options in {self.source}: {where} must be a JSON object, found {type(data).__name__}"
            )
        missing = sorted(required - data.keys())
        if missing:
            keys = ", ".join(f"'{name + '.' if name else ''}{k}'" for k in missing)
            raise ElmoFileError(f"Invalid ELMo options in {self.source}: missing key {keys}")
        unknown = sorted(data.keys() - required - optional)
        if unknown:
            keys = ", ".join(f"'{name + '.' if name else ''}{k}'" for k in unknown)
            raise ElmoFileError(f"Invalid ELMo options in {self.source}: unknown key {keys}")
        return data

    def integer(self, data: Dict[str, Any], key: str, minimum: int) -> int:
        value = data[key.rsplit(".", 1)[-1]]
        if not _is_int(value) or value < minimum:
            raise self.error(key, value, f"an integer >= {minimum}")
        return value

    def choice(self, data: Dict[str, Any], key: str, allowed: tuple) -> Any:
        value = data[key.rsplit(".", 1)[-1]]
        if isinstance(value, bool) or value not in allowed:
            raise self.error(key, value, "one of " + ", ".join(repr(a) for a in allowed))
        return value

    def number(self, data: Dict[str, Any], key: str, default: float) -> float:
        value = data.get(key.rsplit(".", 1)[-1], default)
        if value is None:
            return 0.0
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise self.error(key, value, "a number >= 0 (0 or null: no clipping)")
        return float(value)

    def boolean(self, data: Dict[str, Any], key: str, default: bool) -> bool:
        value = data.get(key.rsplit(".", 1)[-1], default)
        if not isinstance(value, bool):
            raise self.error(key, value, "true or false")
        return value

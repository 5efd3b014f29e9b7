"""``MODEL_CARD.md`` for an exported biLM: data, size, training, perplexities."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Union

from ..atomic import write_text_atomic
from ..bilm import BiLMOptions

TOKENIZERS = {False: 'spaCy\'s English tokenizer (`spacy.blank("en")`)', True: "whitespace (pre-tokenized text)"}


def model_card(options: BiLMOptions, info: Dict[str, Any], notes: str = "") -> str:
    """The card's Markdown.

    info: ``data`` (corpus summary), ``config`` (TrainConfig dict), ``training`` (Trainer.summary()),
    ``unigram_ppl``, ``n_parameters``, ``weights_bytes``, ``exported_layers``, ``windows`` (the
    trainer's ``history["windows"]``).
    notes: extra Markdown sections appended at the end (e.g. why this size, downstream value).
    """
    data, cfg, run = info["data"], info["config"], info["training"]
    lstm, cnn = options.lstm, options.char_cnn
    unigram = info["unigram_ppl"]
    lines = [
        "# ELMo biLM model card",
        "",
        "## Model",
        f"- Character CNN: {cnn.char_embedding_dim}-dim character embeddings, filters {[list(f) for f in cnn.filters]} "
        f"({cnn.n_filters} in all, {cnn.activation}), {cnn.n_highway} highway layer(s), projection to {lstm.projection_dim}.",
        f"- biLSTM: {lstm.n_layers} layer(s) per direction, {lstm.dim} cells with projection to {lstm.projection_dim} "
        f"(ELMo layers of {options.output_dim} dims), cell clip {lstm.cell_clip:g}, projection clip {lstm.proj_clip:g}, "
        f"skip connections {'on' if lstm.use_skip_connections else 'off'}.",
        f"- {info['n_parameters']:,} parameters; `weights.hdf5` {info['weights_bytes'] / 1e6:.1f} MB (float32, bilm-tf/AllenNLP layout).",
        f"- Exported LSTM layers: {info['exported_layers']} (of {info['trained_layers']} trained).",
        "",
        "## Data",
        f"- Training: {_count(data['train_lines'])} lines, {_count(data['train_tokens'])} tokens from {', '.join(Path(p).name for p in data['train_files'])}.",
        f"- Held-out: {_count(data['heldout_lines'])} lines, {_count(data['heldout_tokens'])} tokens from {', '.join(Path(p).name for p in data['heldout_files']) or 'none'}.",
        f"- Tokenization: {TOKENIZERS[bool(data['pretokenized'])]}; skipped lines: {data['skipped_lines'] or 'none'}.",
        f"- Softmax vocabulary: {data['vocab_size']:,} words (`vocab.txt`, `<S>`, `</S>`, `<UNK>` first); adaptive softmax shared by both directions.",
        "",
        "## Training",
        f"- {run['steps']:,} steps ({run['epoch']} full epoch(s) completed), {run['tokens_seen']:,} predicted tokens per direction, "
        f"{run['elapsed_s'] / 60:.1f} minutes{_where(run)}.",
        f"- {_windows(info.get('windows') or [[0, cfg['max_len']]])} with `<S>`/`</S>`, zero initial state (as at inference); "
        f"about {cfg['tokens_per_batch']} tokens per batch; Adam, peak learning rate {cfg['lr']:g}, "
        f"{cfg['warmup_steps']} warmup steps then inverse square-root decay{_cooldown(cfg)}; dropout {cfg['dropout']:g}; "
        f"gradient norm clipped at {cfg['clip_norm']:g}; seed {cfg['seed']}.",
        *(
            [f"- Started from the biLM weights `{cfg['init_weights']}` (the softmax from random weights)."]
            if cfg.get("init_weights")
            else []
        ),
        "",
        "## Held-out perplexity",
        "",
        "| model | forward | backward |",
        "|---|---|---|",
        f"| this biLM | {_fmt(run['heldout_forward_ppl'])} | {_fmt(run['heldout_backward_ppl'])} |",
        f"| unigram (add-one word frequencies of the training text) | {_fmt(unigram)} | {_fmt(unigram)} |",
        "",
        "Both over the same vocabulary (rare words as `<UNK>`) and the same predictions (every word and "
        f"the end marker of its direction), on held-out windows of at most {cfg.get('heldout_max_len') or cfg['max_len']} tokens.",
        *_as_trained(cfg, run),
    ]
    if info.get("curve"):
        lines += ["", f"![training curve]({info['curve']})"]
    if notes:
        lines += ["", notes.strip()]
    return "\n".join(lines) + "\n"


def write_model_card(path: Union[str, Path], options: BiLMOptions, info: Dict[str, Any], notes: str = "") -> Path:
    """Write :func:`model_card` to ``path`` (atomically)."""
    return write_text_atomic(path, model_card(options, info, notes))


def _fmt(value: Any) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def _count(n) -> str:
    """``n`` with thousands separators; "uncounted" for None (a streamed corpus with a given vocabulary)."""
    return "uncounted" if n is None else f"{n:,}"


def _where(run: Dict[str, Any]) -> str:
    """ ", on N process(es) (device), X predicted tokens/s" for the last session, when known."""
    if "processes" not in run:
        return ""
    rate = f", {run['tokens_per_s']:,.0f} predicted tokens/s" if run.get("tokens_per_s") else ""
    return f" (last session: {run['processes']} process(es) on {run['device']}{rate})"


def _cooldown(cfg: Dict[str, Any]) -> str:
    steps = cfg.get("cooldown_steps", 0)
    return f", falling linearly towards 0 over the last {steps:,} steps" if steps else ""


def _windows(windows: List[List[int]]) -> str:
    """The training windows: "Windows of at most 30 tokens", with the steps of each length if it changed."""
    if len(windows) == 1:
        return f"Windows of at most {windows[0][1]} tokens"
    spans = [f"{length} tokens from step {start:,}" for start, length in windows[1:]]
    return f"Windows of at most {windows[0][1]} tokens, then of at most " + ", then ".join(spans)


def _as_trained(cfg: Dict[str, Any], run: Dict[str, Any]) -> List[str]:
    """The held-out perplexity in the training windows, when the held-out windows are shorter."""
    if not run.get("heldout_as_trained_ppl"):
        return []
    forward, backward = run["heldout_as_trained_ppl"]
    return [
        f"On the held-out text in windows of at most {cfg['max_len']} tokens as in training (lines up to that length "
        f"whole, as the `elmo` component embeds sentences): forward {forward:.1f}, backward {backward:.1f}."
    ]

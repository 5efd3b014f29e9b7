"""Our LinearChainCRF beside AllenNLP 2.10.1's ConditionalRandomField, side by side in one run.

A batch of 32 CoNLL-2003-length sentences (the lengths of the first 32 training sentences of
``../shared/data/conll2003/train.txt``, or a seeded distribution with mean ~14 and max 40 when it is
absent) with random float32 emissions (seed 0), for 9 tags (BIO over PER LOC ORG MISC) and 17 tags
(BILOU, AllenNLP's "BIOUL", over the same labels). AllenNLP's CRF is built with the constraints of
its ``allowed_transitions`` and ``include_start_end_transitions=True`` and seeded random parameters
(its own initialization); its transitions, start and end scores are copied into our CRF with our
constraints for the same tag set (``tag_schemes.allowed_transitions``; AllenNLP's label dict is built
from our ``tag_names`` so that the indices agree, and its constraint mask is checked against ours).

Timed on one thread each side: AllenNLP in one worker process with the reference python, kept for
the whole run; in each of ``--rounds`` rounds, per operation, a short series on each side back to
back (warm-up calls, then ``--repeats`` timed), who goes first alternating by round, so that on a
shared machine both see about the same load; figures are medians over all timed calls:

- log-likelihood of the batch, forward only under ``no_grad``: AllenNLP ``crf(logits, tags, mask)``,
  ours ``-crf.nll(emissions, tags, lengths).sum()``;
- the same forward + backward (``torch.autograd.grad`` w.r.t. the emissions and the CRF's three
  parameters);
- Viterbi under ``no_grad``: AllenNLP ``crf.viterbi_tags(logits, mask)`` (a Python loop over the
  sentences), ours ``crf.decode(emissions, lengths)``.

Checked: the decoded paths are identical (asserted) and the Viterbi scores agree. AllenNLP applies
its constraints only in decoding, its likelihood ignores them; ours applies them in both. The
log-likelihood values (and their gradients) are therefore compared with the constraints off on our
side (``allowed=None``), and our constrained value is reported beside them.

The AllenNLP reference is looked up at ``$ALLENNLP_REFERENCE`` (default ``~/allennlp-reference``,
built by ``../shared/tools/allennlp_reference/setup.sh``). Without it the script says so in one line,
times ours only and exits 0 (writing the result files only where ``--output``/``--json`` are given).

Usage: ``python bench/crf_speed.py [--repeats 30] [--rounds 3] [--threads 1] [--output F] [--json F]``
(default outputs ``bench/results/crf_speed.md`` and ``.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
import torch

# Only the standard library, numpy and torch above: the same file runs as the AllenNLP worker with
# the reference environment's python (``--allennlp-worker``), which has no spacy_elmo_mix.

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SHARED = Path(os.environ.get("SPACY_ELMO_MIX_SHARED", REPO.parent / "shared"))
CONLL = SHARED / "data" / "conll2003" / "train.txt"
LABELS = ["PER", "LOC", "ORG", "MISC"]
# (name, our scheme, AllenNLP's constraint type)
SCHEMES = [("BIO", "BIO", "BIO"), ("BILOU", "BILOU", "BIOUL")]
BATCH = 32
SEED = 0
OPERATIONS = [("loglik", "log-likelihood"), ("loglik_backward", "log-lik. + backward"), ("viterbi", "Viterbi")]
TARGETS = {"loglik": 1.0, "loglik_backward": None, "viterbi": 10.0}  # AllenNLP time / ours, at least


# ---------------------------------------------------------------------------------------------
# Shared by both sides
# ---------------------------------------------------------------------------------------------


def time_ms(fn: Callable[[], object], repeats: int, warmup: int) -> List[float]:
    """Wall times (ms) of ``repeats`` calls of ``fn`` after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(1000 * (time.perf_counter() - start))
    return times


def conll_lengths(n: int) -> tuple:
    """The lengths of the first ``n`` CoNLL-2003 training sentences (-DOCSTART- and empty lines
    skipped), or of a seeded distribution (gamma, mean ~14, 1..40) when the file is absent."""
    if CONLL.exists():
        lengths, current = [], 0
        with CONLL.open(encoding="utf8") as f:
            for line in f:
                line = line.strip()
                if line.startswith("-DOCSTART-"):
                    continue
                if not line:
                    if current:
                        lengths.append(current)
                        if len(lengths) == n:
                            break
                    current = 0
                else:
                    current += 1
        if current and len(lengths) < n:
            lengths.append(current)
        if len(lengths) == n:
            return lengths, f"the first {n} sentences of CoNLL-2003 train.txt"
    rng = np.random.default_rng(SEED)
    return np.clip(np.rint(rng.gamma(2.0, 7.0, n)), 1, 40).astype(
        int
    ).tolist(), f"{n} seeded gamma(2, 7) lengths in 1..40"


# ---------------------------------------------------------------------------------------------
# AllenNLP side (runs with the reference python)
# ---------------------------------------------------------------------------------------------


def allennlp_worker(inputs: Path, threads: int) -> None:
    """Build AllenNLP's CRFs on the saved batch; print their parameters, values and paths as one JSON
    line, then answer timing requests (``NAME OP REPEATS WARMUP`` lines on stdin, one JSON list of ms
    per request) until stdin closes."""
    torch.set_num_threads(threads)
    from allennlp.modules.conditional_random_field import ConditionalRandomField, allowed_transitions

    data = torch.load(inputs)
    info = {"torch": torch.__version__, "threads": torch.get_num_threads(), "cases": {}}
    jobs: Dict[str, Dict[str, Callable[[], object]]] = {}
    for name, case in data["cases"].items():
        tags = case["tag_names"]
        torch.manual_seed(SEED)
        crf = ConditionalRandomField(
            len(tags),
            constraints=allowed_transitions(case["allennlp_scheme"], dict(enumerate(tags))),
            include_start_end_transitions=True,
        )
        logits, gold, mask = data["emissions"][name], case["gold"], data["mask"]
        with torch.no_grad():
            loglik = float(crf(logits, gold, mask))
            decoded = crf.viterbi_tags(logits, mask)
        leaf = logits.clone().requires_grad_(True)
        params = [crf.transitions, crf.start_transitions, crf.end_transitions]
        grads = torch.autograd.grad(crf(leaf, gold, mask), [leaf, *params])
        info["cases"][name] = {
            "loglik": loglik,
            "paths": [p for p, _ in decoded],
            "scores": [s for _, s in decoded],
            "transitions": crf.transitions.detach().tolist(),
            "start": crf.start_transitions.detach().tolist(),
            "end": crf.end_transitions.detach().tolist(),
            "constraint_mask": crf._constraint_mask.detach().bool().tolist(),
            "grad_emissions": grads[0].tolist(),
        }

        def loglik_forward(crf=crf, logits=logits, gold=gold, mask=mask):
            with torch.no_grad():
                return crf(logits, gold, mask)

        def loglik_backward(crf=crf, leaf=leaf, gold=gold, mask=mask, params=params):
            return torch.autograd.grad(crf(leaf, gold, mask), [leaf, *params])

        def viterbi(crf=crf, logits=logits, mask=mask):
            with torch.no_grad():
                return crf.viterbi_tags(logits, mask)

        jobs[name] = {"loglik": loglik_forward, "loglik_backward": loglik_backward, "viterbi": viterbi}
    print(json.dumps(info), flush=True)
    for line in sys.stdin:
        name, op, repeats, warmup = line.split()
        print(json.dumps(time_ms(jobs[name][op], int(repeats), int(warmup))), flush=True)


class AllenNLP:
    """The AllenNLP worker process (the reference python), kept for the whole run so that its
    timings interleave with ours operation by operation."""

    def __init__(self, python: Path, inputs: Path, threads: int) -> None:
        from allennlp_speed import REFERENCE

        env = dict(
            os.environ, PYTHONPATH=str(REFERENCE / "shims"), OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads)
        )
        command = [
            str(python),
            str(Path(__file__).resolve()),
            "--allennlp-worker",
            str(inputs),
            "--threads",
            str(threads),
        ]
        # stderr to a file, not a pipe: a pipe nobody reads can fill with warnings and stall the worker.
        self.errors = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen(
            command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors, text=True
        )
        self.info = self._answer()

    def _answer(self):
        line = self.process.stdout.readline()
        if not line:
            self.process.wait()
            self.errors.seek(0)
            raise SystemExit(f"AllenNLP CRF worker failed:\n{self.errors.read()[-3000:]}")
        return json.loads(line)

    def time_ms(self, name: str, op: str, repeats: int, warmup: int) -> List[float]:
        self.process.stdin.write(f"{name} {op} {repeats} {warmup}\n")
        self.process.stdin.flush()
        return self._answer()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait()
        self.errors.close()


def reference_python() -> Optional[Path]:
    """The AllenNLP reference environment's python, or None when it is absent."""
    from allennlp_speed import REFERENCE

    python = REFERENCE / "venv" / "bin" / "python"
    return python if python.exists() else None


# ---------------------------------------------------------------------------------------------
# Our side (the project's venv)
# ---------------------------------------------------------------------------------------------


def make_inputs(lengths: Sequence[int]) -> Dict:
    """Seeded emissions [32, L, T] for each tag set, valid gold tags (random spans), the mask."""
    from spacy_elmo_mix.tagging.tag_schemes import spans_to_tags, tag_names

    rng = np.random.default_rng(SEED)
    gen = torch.Generator().manual_seed(SEED)
    max_len = max(lengths)
    lengths_t = torch.tensor(lengths)
    data = {"lengths": lengths_t, "mask": torch.arange(max_len) < lengths_t.unsqueeze(1), "emissions": {}, "cases": {}}
    for name, scheme, allennlp_scheme in SCHEMES:
        tags = tag_names(LABELS, scheme)
        index = {t: i for i, t in enumerate(tags)}
        gold = torch.zeros(len(lengths), max_len, dtype=torch.long)
        for b, n in enumerate(lengths):
            spans, i = [], 0
            while i < n:  # a span starts at about one token in six, 1-3 tokens long
                if rng.random() < 1 / 6:
                    end = min(n, i + int(rng.integers(1, 4)))
                    spans.append((i, end, LABELS[int(rng.integers(len(LABELS)))]))
                    i = end
                else:
                    i += 1
            gold[b, :n] = torch.tensor([index[t] for t in spans_to_tags(spans, n, scheme)])
        data["emissions"][name] = torch.randn(len(lengths), max_len, len(tags), generator=gen)
        data["cases"][name] = {"tag_names": tags, "scheme": scheme, "allennlp_scheme": allennlp_scheme, "gold": gold}
    return data


def our_crfs(case: Dict, params: Optional[Dict]):
    """(constrained, unconstrained) LinearChainCRFs with AllenNLP's parameters (or seeded random ones)."""
    from spacy_elmo_mix.tagging.crf import LinearChainCRF
    from spacy_elmo_mix.tagging.tag_schemes import allowed_transitions

    tags = case["tag_names"]
    allowed = tuple(torch.from_numpy(a) for a in allowed_transitions(tags, case["scheme"]))
    crfs = LinearChainCRF(len(tags), allowed), LinearChainCRF(len(tags), None)
    gen = torch.Generator().manual_seed(SEED)
    values = (
        {k: torch.tensor(params[k]) for k in ("transitions", "start", "end")}
        if params
        else {
            "transitions": torch.randn(len(tags), len(tags), generator=gen) * (1 / len(tags)) ** 0.5,
            "start": torch.randn(len(tags), generator=gen),
            "end": torch.randn(len(tags), generator=gen),
        }
    )
    for crf in crfs:
        with torch.no_grad():
            for k, v in values.items():
                getattr(crf, k).copy_(v)
    return crfs, allowed


def check_constraints(allowed, mask: List[List[bool]], n_tags: int) -> None:
    """AllenNLP's [T+2, T+2] constraint mask (start row T, end column T+1) equals ours."""
    mask = torch.tensor(mask)
    start, trans, end = allowed
    assert torch.equal(mask[:n_tags, :n_tags], trans), "transition constraints differ from AllenNLP's"
    assert torch.equal(mask[n_tags, :n_tags], start), "start constraints differ from AllenNLP's"
    assert torch.equal(mask[:n_tags, n_tags + 1], end), "end constraints differ from AllenNLP's"


def our_jobs(data: Dict, name: str, crf) -> Dict[str, Callable[[], object]]:
    """The timed calls of our side, by operation."""
    emissions, gold, lengths = data["emissions"][name], data["cases"][name]["gold"], data["lengths"]
    leaf = emissions.clone().requires_grad_(True)
    params = [crf.transitions, crf.start, crf.end]

    def loglik_forward():
        with torch.no_grad():
            return -crf.nll(emissions, gold, lengths).sum()

    def loglik_backward():
        return torch.autograd.grad(-crf.nll(leaf, gold, lengths).sum(), [leaf, *params])

    def viterbi():
        with torch.no_grad():
            return crf.decode(emissions, lengths)

    def viterbi_lists():
        with torch.no_grad():
            paths, scores = crf.decode(emissions, lengths)
            return paths.tolist(), scores.tolist()

    return {
        "loglik": loglik_forward,
        "loglik_backward": loglik_backward,
        "viterbi": viterbi,
        "viterbi_lists": viterbi_lists,
    }


def compare(data: Dict, name: str, crfs, allen: Dict) -> Dict:
    """Paths (asserted identical), Viterbi scores, and log-likelihoods and gradients (constraints off
    on our side, as AllenNLP's likelihood has none)."""
    constrained, free = crfs
    emissions, gold, lengths = data["emissions"][name], data["cases"][name]["gold"], data["lengths"]
    with torch.no_grad():
        paths, scores = constrained.decode(emissions, lengths)
        ours_free = float(-free.nll(emissions, gold, lengths).sum())
        ours_constrained = float(-constrained.nll(emissions, gold, lengths).sum())
    for b, n in enumerate(lengths.tolist()):
        assert paths[b, :n].tolist() == allen["paths"][b], f"{name}: sentence {b} decodes differently from AllenNLP"
    leaf = emissions.clone().requires_grad_(True)
    grad = torch.autograd.grad(-free.nll(leaf, gold, lengths).sum(), leaf)[0]
    return {
        "paths_identical": True,
        "sentences": len(allen["paths"]),
        "viterbi_score_max_abs_diff": float((scores - torch.tensor(allen["scores"])).abs().max()),
        "loglik_allennlp": allen["loglik"],
        "loglik_ours_unconstrained": ours_free,
        "loglik_ours_constrained": ours_constrained,
        "loglik_abs_diff": abs(ours_free - allen["loglik"]),
        "grad_emissions_max_abs_diff": float((grad - torch.tensor(allen["grad_emissions"])).abs().max()),
    }


def median(values: List[float]) -> float:
    return statistics.median(values)


def cpu_vendor() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("vendor_id"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown vendor"


def markdown(result: Dict) -> str:
    r = result
    allen = r["allennlp_torch"] is not None
    lines = [
        f"# LinearChainCRF beside AllenNLP {'2.10.1' if allen else '(absent)'} ConditionalRandomField",
        "",
        f"Batch of {BATCH} sentences ({r['lengths_from']}: {sum(r['lengths'])} tokens, mean length "
        f"{np.mean(r['lengths']):.1f}, max {max(r['lengths'])}), random float32 emissions, tags BIO (9) and BILOU (17, "
        f"AllenNLP's \"BIOUL\") over {' '.join(LABELS)}, start/end transitions, each side with its constraints (AllenNLP's act "
        f"only in `viterbi_tags`, ours in the likelihood too). {r['rounds']} rounds; in each, per operation, a series on each "
        f"side back to back ({r['warmup']} warm-up calls, then {r['repeats']} timed), who goes first alternating by round; "
        f"AllenNLP runs in its own process, kept for the run. Figures: medians over all timed calls (ms); ratio = AllenNLP "
        f"median / ours median (the median of the per-round ratios is in the JSON). {r['threads']} thread(s) on each side "
        f"(`torch.set_num_threads`).",
        "",
        f"CPU: {r['cpu_vendor']}, {r['cpu']} ({r['cpu_flags']}), {r['cpus']} CPUs, 1-minute load average "
        f"{r['load_before']:.1f} before and {r['load_after']:.1f} after. torch: ours {r['torch']}, AllenNLP's "
        f"{r['allennlp_torch'] or 'n/a'}.",
        "",
        "Targets: Viterbi >= 10x AllenNLP's `viterbi_tags`, log-likelihood >= 1x (ratio = AllenNLP ms / ours ms).",
        "",
        "| tags | operation | AllenNLP ms | ours ms | ratio | target | met |",
        "|---|---|---:|---:|---:|---:|:---:|",
    ]
    for name, scheme, _ in SCHEMES:
        row = r["timings"][name]
        n_tags = row["n_tags"]
        for op, label in OPERATIONS:
            ours = row["ours"][op]
            a = row["allennlp"].get(op) if allen else None
            ratio = a / ours if a else None
            target = TARGETS[op]
            met = "" if ratio is None or target is None else ("yes" if ratio >= target else "**no**")
            lines.append(
                f"| {n_tags} ({scheme}) | {label} | {f'{a:.3f}' if a else 'skipped'} | {ours:.3f} | "
                f"{f'**{ratio:.2f}x**' if ratio else ''} | {f'>= {target:g}x' if target else ''} | {met} |"
            )
    lines += [
        "",
        "Ours with the paths converted to Python lists (as AllenNLP's `viterbi_tags` returns them): "
        + ", ".join(
            f"{len(r['timings'][n]['tag_names'])} tags {r['timings'][n]['ours']['viterbi_lists']:.3f} ms"
            for n, _, _ in SCHEMES
        )
        + ".",
    ]
    if allen:
        lines += [
            "",
            "Checks (asserted: every decoded path identical to AllenNLP's). AllenNLP applies its constraints "
            "only in `viterbi_tags`; its likelihood ignores them, ours applies them in the likelihood too, so the "
            "log-likelihood values and gradients are compared with our constraints switched off (`allowed=None`); "
            "our constrained value is larger (the forbidden sequences leave the partition function).",
            "",
            "| tags | paths identical | max abs diff Viterbi score | log-lik. AllenNLP | ours, no constraints | abs diff | "
            "max abs diff d/d emissions | ours, constrained |",
            "|---|:---:|---:|---:|---:|---:|---:|---:|",
        ]
        for name, scheme, _ in SCHEMES:
            c = r["checks"][name]
            lines.append(
                f"| {len(c['tag_names'])} ({scheme}) | {c['sentences']}/{c['sentences']} | {c['viterbi_score_max_abs_diff']:.1e} | "
                f"{c['loglik_allennlp']:.4f} | {c['loglik_ours_unconstrained']:.4f} | {c['loglik_abs_diff']:.1e} | "
                f"{c['grad_emissions_max_abs_diff']:.1e} | {c['loglik_ours_constrained']:.4f} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=10, help="timed calls per operation, side and round")
    parser.add_argument("--warmup", type=int, default=2, help="untimed calls before each timed series")
    parser.add_argument(
        "--rounds", type=int, default=10, help="interleaved rounds; figures are medians over all their calls"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads on each side")
    parser.add_argument(
        "--output", type=Path, help="the markdown table (default bench/results/crf_speed.md when AllenNLP is present)"
    )
    parser.add_argument(
        "--json", type=Path, help="the results as JSON (default bench/results/crf_speed.json when AllenNLP is present)"
    )
    parser.add_argument("--allennlp-worker", type=Path, metavar="INPUTS", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.allennlp_worker:
        allennlp_worker(args.allennlp_worker, args.threads)
        return

    from allennlp_speed import cpu_flags
    from bilm_speed import cpu_name
    from spacy_elmo_mix.atomic import write_text_atomic

    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0]
    lengths, lengths_from = conll_lengths(BATCH)
    data = make_inputs(lengths)
    python = reference_python()
    if python is None:
        print(
            "AllenNLP reference environment absent ($ALLENNLP_REFERENCE or ~/allennlp-reference; build it with "
            "../shared/tools/allennlp_reference/setup.sh): timing ours only"
        )
    print(
        f"torch {torch.__version__}, {cpu_vendor()} {cpu_name()} ({cpu_flags()}), {args.threads} thread(s); "
        f"{BATCH} sentences, {lengths_from}, mean length {np.mean(lengths):.1f}, max {max(lengths)}",
        flush=True,
    )
    ratios: Dict[str, Dict[str, List[float]]] = {name: {} for name, _, _ in SCHEMES}  # AllenNLP / ours, per round
    times: Dict[str, Dict[str, Dict[str, List[List[float]]]]] = {
        name: {"ours": {}, "allennlp": {}} for name, _, _ in SCHEMES
    }  # per round: a list of ms
    with tempfile.TemporaryDirectory() as tmp:
        inputs = Path(tmp) / "inputs.pt"
        torch.save(data, inputs)
        allen = AllenNLP(python, inputs, args.threads) if python is not None else None
        try:
            crfs = {
                name: our_crfs(data["cases"][name], allen.info["cases"][name] if allen else None)
                for name, _, _ in SCHEMES
            }
            jobs = {name: our_jobs(data, name, crfs[name][0][0]) for name, _, _ in SCHEMES}
            for round_ in range(args.rounds):
                print(f"round {round_ + 1} of {args.rounds}", flush=True)
                for name, _, _ in SCHEMES:
                    for op, job in jobs[name].items():
                        if allen is None or op not in TARGETS:  # ours only
                            times[name]["ours"].setdefault(op, []).append(time_ms(job, args.repeats, args.warmup))
                            continue
                        # Short warm series back to back, who goes first alternating by round: both sides see
                        # about the same load on a shared machine, each with its own caches warm. (Single calls
                        # in turn were tried: after the other process ran, ours were ~0.5 ms slower, cold.)
                        first_ours = round_ % 2 == 1
                        if first_ours:
                            ours = time_ms(job, args.repeats, args.warmup)
                        allen_ms = allen.time_ms(name, op, args.repeats, args.warmup)
                        if not first_ours:
                            ours = time_ms(job, args.repeats, args.warmup)
                        times[name]["allennlp"].setdefault(op, []).append(allen_ms)
                        times[name]["ours"].setdefault(op, []).append(ours)
                        ratios[name].setdefault(op, []).append(median(allen_ms) / median(ours))
        finally:
            if allen is not None:
                allen.close()
    timings, checks = {}, {}
    for name, _scheme, _ in SCHEMES:
        case = data["cases"][name]
        timings[name] = {"n_tags": len(case["tag_names"]), "tag_names": case["tag_names"]}
        for side in ("ours", "allennlp"):
            timings[name][side] = {
                op: median([t for round_ in rounds for t in round_]) for op, rounds in times[name][side].items()
            }
            timings[name][f"{side}_round_medians"] = {
                op: [median(r) for r in rounds] for op, rounds in times[name][side].items()
            }
        timings[name]["median_round_ratio"] = {op: median(r) for op, r in ratios[name].items()}
        if allen is not None:
            (constrained, free), allowed = crfs[name]
            reference = allen.info["cases"][name]
            check_constraints(allowed, reference["constraint_mask"], len(case["tag_names"]))
            checks[name] = {
                "tag_names": case["tag_names"],
                "constraints_identical": True,
                **compare(data, name, (constrained, free), reference),
            }
    result = {
        "lengths": lengths,
        "lengths_from": lengths_from,
        "repeats": args.repeats,
        "warmup": args.warmup,
        "rounds": args.rounds,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "allennlp_torch": allen.info["torch"] if allen else None,
        "allennlp_threads": allen.info["threads"] if allen else None,
        "cpu_vendor": cpu_vendor(),
        "cpu": cpu_name(),
        "cpu_flags": cpu_flags(),
        "cpus": os.cpu_count(),
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
        "targets": TARGETS,
        "timings": timings,
        "checks": checks,
    }
    text = markdown(result)
    print(text)
    output, json_out = args.output, args.json
    if allen is not None:
        output = output or HERE / "results" / "crf_speed.md"
        json_out = json_out or HERE / "results" / "crf_speed.json"
    if output:
        write_text_atomic(output, text)
    if json_out:
        write_text_atomic(json_out, json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

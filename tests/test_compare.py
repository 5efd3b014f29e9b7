"""compare: means, std, bold, † marks, missing runs, layer weights and timing from synthetic results."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from scipy.stats import ttest_ind

from spacy_elmo_mix.__main__ import main as cli
from spacy_elmo_mix.cli.compare import main as compare_cli
from spacy_elmo_mix.workflow.compare import compare
from spacy_elmo_mix.workflow.compare.loading import MetricsError, read_metrics
from spacy_elmo_mix.workflow.compare.statistics import scheme_order


def write_run(root, dataset, scheme, seed, score, metric="ents_f", **extra):
    run_dir = root / "runs" / dataset / scheme / f"seed{seed}"
    run_dir.mkdir(parents=True, exist_ok=True)
    metrics = {"dataset": dataset, "scheme": scheme, "seed": seed, "score": score, "metric": metric, **extra}
    (run_dir / "metrics.json").write_text(json.dumps(metrics))
    return run_dir


def write_cell(root, dataset, scheme, scores, **extra):
    for seed, score in enumerate(scores, start=1):
        write_run(root, dataset, scheme, seed, score, **extra)


def row_cells(table_md, label):
    """The cell texts of the table row whose first cell contains ``label``."""
    row = next(line for line in table_md.splitlines() if line.startswith("|") and label in line.split("|")[1])
    return [cell.strip() for cell in row.strip("|").split("|")][1:]


BEST = [0.900, 0.902, 0.898, 0.901, 0.899]
CLEARLY_WORSE = [0.850, 0.852, 0.848, 0.851, 0.849]
NOT_CLEARLY_WORSE = [0.905, 0.890, 0.899, 0.893, 0.901]  # mean 0.8976, large variance


def test_means_std_bold_and_significance(tmp_path):
    write_cell(tmp_path, "conll2003", "weighted", BEST)
    write_cell(tmp_path, "conll2003", "layer1", CLEARLY_WORSE)
    write_cell(tmp_path, "conll2003", "average", NOT_CLEARLY_WORSE)
    p_worse = ttest_ind(BEST, CLEARLY_WORSE, equal_var=False, alternative="greater").pvalue
    p_close = ttest_ind(BEST, NOT_CLEARLY_WORSE, equal_var=False, alternative="greater").pvalue
    assert p_worse < 0.01 < p_close  # the cases are what they claim to be

    report = compare(tmp_path)
    cells = row_cells(report.outputs["table"].read_text(), "conll2003")
    # paper order: layer1, average, weighted
    assert cells == [
        f"85.00 ± {100 * np.std(CLEARLY_WORSE, ddof=1):.2f}†",
        f"89.76 ± {100 * np.std(NOT_CLEARLY_WORSE, ddof=1):.2f}",
        f"**90.00 ± {100 * np.std(BEST, ddof=1):.2f}**",
    ]
    table = report.table
    assert table.cells["conll2003", "layer1"].p_value == pytest.approx(p_worse)
    assert table.cells["conll2003", "average"].p_value == pytest.approx(p_close)
    assert "5 seeds per cell" in report.outputs["table"].read_text()


def test_fewer_than_two_seeds_is_not_tested(tmp_path):
    write_cell(tmp_path, "wnut16", "weighted", BEST)
    write_cell(tmp_path, "wnut16", "layer2", [0.5])
    text = compare(tmp_path, seeds=[1, 2, 3, 4, 5]).outputs["table"].read_text()
    assert row_cells(text, "wnut16") == ["50.00 ± n/a (n=1)", "**90.00 ± 0.16** (n=5)"]
    assert "wnut16/layer2: not tested for significance" in text
    assert "missing wnut16/layer2, seeds 2-5: not run (no run folder)" in text


def test_notes_name_each_reason_once_with_its_schemes_and_seed_ranges(tmp_path):
    """A grid in progress gives one note per data set, reason and set of seeds (schemes in the paper's
    order, consecutive seeds as ranges), not one per cell; schemes with the same configs share one."""
    for scheme in ("layer1", "average"):
        write_cell(tmp_path, "conll2003", scheme, [0.8])
    for scheme in ("weighted", "concat"):
        write_cell(tmp_path, "conll2003", scheme, [0.9, 0.91])
    write_cell(tmp_path, "conll2003", "layer2", [0.8, 0.81, 0.82, 0.83])
    (tmp_path / "runs/conll2003/layer2/seed3/metrics.json").unlink()
    text = compare(tmp_path, seeds=[1, 2, 3, 4, 6, 7]).outputs["table"].read_text()
    notes = text.split("Notes:")[1]
    assert "conll2003/{layer1, average}: not tested for significance" in notes
    assert "missing conll2003/{layer1, average}, seeds 2-4, 6, 7: not run (no run folder)" in notes
    assert "missing conll2003/{concat, weighted}, seeds 3, 4, 6, 7: not run (no run folder)" in notes
    assert "missing conll2003/layer2, seed 3: no metrics.json" in notes
    assert "missing conll2003/layer2, seeds 6, 7: not run (no run folder)" in notes
    assert notes.count("missing") == 4


def test_tied_best_are_all_bold(tmp_path):
    write_cell(tmp_path, "ud_ewt", "layer1", [0.9, 0.8], metric="pos_acc")
    write_cell(tmp_path, "ud_ewt", "layer2", [0.8, 0.9], metric="pos_acc")
    cells = row_cells(compare(tmp_path).outputs["table"].read_text(), "ud_ewt")
    assert all(cell.startswith("**85.00") for cell in cells)


def test_missing_and_unreadable_runs_are_reported(tmp_path):
    write_cell(tmp_path, "conll2003", "weighted", [0.9, 0.91])
    write_cell(tmp_path, "conll2003", "layer1", [0.8, 0.81])
    (tmp_path / "runs/conll2003/layer1/seed2/metrics.json").write_text("{not json")
    failed = tmp_path / "runs/conll2003/concat/seed1"
    failed.mkdir(parents=True)
    (failed / "log.txt").write_text("Traceback ...")
    report = compare(tmp_path)
    missing = report.results.missing
    assert (
        "unreadable" in missing["conll2003", "layer1", 2]
        and "layer1/seed2/metrics.json" in missing["conll2003", "layer1", 2]
    )
    assert missing["conll2003", "concat", 1].startswith("no metrics.json")
    assert missing["conll2003", "concat", 2] == "not run (no run folder)"
    text = report.outputs["table"].read_text()
    assert row_cells(text, "conll2003") == ["80.00 ± n/a (n=1)", "–", "**90.50 ± 0.71** (n=2)"]
    assert (
        "missing conll2003/concat, seeds 1" not in text and "missing conll2003/concat, seed 1: no metrics.json" in text
    )


def test_unknown_schemes_follow_the_paper_order():
    assert scheme_order(["zeta", "weighted12", "alpha", "layer3", "concat", "layer1"]) == [
        "layer1",
        "layer3",
        "concat",
        "weighted12",
        "alpha",
        "zeta",
    ]


def test_read_metrics_errors_name_file_and_key(tmp_path):
    run_dir = write_run(tmp_path, "conll2003", "weighted", 1, 91.2)
    with pytest.raises(MetricsError, match=r"seed1/metrics.json: key 'score' must be a fraction"):
        read_metrics(run_dir / "metrics.json", ("conll2003", "weighted", 1))
    with pytest.raises(MetricsError, match=r"key 'seed' is 1 but the folder says 2"):
        read_metrics(run_dir / "metrics.json", ("conll2003", "weighted", 2))
    (run_dir / "metrics.json").write_text(json.dumps({"dataset": "conll2003"}))
    with pytest.raises(MetricsError, match=r"missing key 'scheme'"):
        read_metrics(run_dir / "metrics.json", ("conll2003", "weighted", 1))


def test_layer_weights_and_timing(tmp_path):
    lw = lambda w, g: {"ner": {"weights": w, "gamma": g}}  # noqa: E731
    write_run(tmp_path, "conll2003", "weighted", 1, 0.9, train_seconds=100, layer_weights=lw([0.2, 0.3, 0.5], 1.0))
    write_run(tmp_path, "conll2003", "weighted", 2, 0.9, train_seconds=140, layer_weights=lw([0.4, 0.3, 0.3], 2.0))
    write_run(tmp_path, "conll2003", "weighted12", 1, 0.9, train_seconds=90, layer_weights=lw([0.5, 0.5], 1.0))
    write_run(tmp_path, "conll2003", "average", 1, 0.9, train_seconds=80, layer_weights=lw([0.5, 0.6], 1.0))
    report = compare(tmp_path)
    weights = report.outputs["layer_weights"].read_text()
    assert "| `conll2003` | `weighted` | ner | 0.300 | 0.300 | 0.400 | 1.500 | 2 |" in weights
    assert "| `conll2003` | `weighted12` | ner | 0.500 | 0.500 | – | 1.000 | 1 |" in weights
    assert "`average`" not in weights  # its weights do not sum to 1: left out, with a note
    assert any("layer_weights.ner.weights must be softmax-normalized" in note for note in report.results.notes)
    timing = report.outputs["timing"].read_text()
    assert "| `conll2003` | 80.0 (n=1) | 120.0 (n=2) | 90.0 (n=1) | 0.750 |" in timing


def test_outputs_on_empty_results_and_cli(tmp_path, capsys):
    assert (
        compare_cli(["--results", str(tmp_path), "--datasets", "conll2003", "--schemes", "layer1", "--seeds", "1"]) == 0
    )
    out = capsys.readouterr().out
    assert "0 finished runs, 1 missing" in out and "missing conll2003/layer1, seed 1" in out
    assert (tmp_path / "scores.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| CoNLL-2003 NER (`conll2003`) | – |" in (tmp_path / "table.md").read_text()
    assert {p.name for p in tmp_path.iterdir()} == {"table.md", "scores.png", "layer_weights.md", "timing.md"}


def test_table_names_each_schemes_config(tmp_path):
    write_cell(tmp_path, "conll2003", "weighted", BEST, config="ner_elmo_hash.cfg")
    write_cell(tmp_path, "conll2003", "baseline", CLEARLY_WORSE, config="ner_baseline.cfg")
    table = compare(tmp_path).outputs["table"].read_text()
    assert "training configs: `weighted`: ner_elmo_hash.cfg; `baseline`: ner_baseline.cfg" in table
    write_run(tmp_path, "conll2003", "weighted", 6, 0.9, config="ner.cfg")  # another config: not pooled
    report = compare(tmp_path)
    assert len(report.table.cells["conll2003", "weighted"].scores) == 5
    assert (
        "not averaged in: conll2003/weighted, seed 6: its setup differs from the cell's other 5 runs in config (ner.cfg, not ner_elmo_hash.cfg)"
        in report.outputs["table"].read_text()
    )


PROTOCOL = {"architecture": "paper", "tokens": "given", "stopping": "patience", "patience_epochs": 5, "max_epochs": 50}


def identity(seed, **settings):
    """A run identity as ``workflow.run`` records it (no files, so it can never be stale)."""
    return {
        "command": None,
        "settings": {"config": "crf_ner.cfg", "system.seed": seed, **settings},
        "files": {},
        "seed": seed,
    }


def test_runs_of_another_budget_are_never_pooled(tmp_path):
    """The reported trial: seeds 1-3 at 300 steps, then seed 1 rerun at 400 steps over its folder."""
    for seed, score in zip((1, 2, 3), (0.40, 0.37, 0.36)):
        steps = 400 if seed == 1 else 300
        write_run(
            tmp_path,
            "mydata",
            "weighted",
            seed,
            score,
            max_steps=steps,
            identity=identity(seed, **{"training.max_steps": steps}),
        )
    text = compare(tmp_path).outputs["table"].read_text()
    assert row_cells(text, "mydata") == ["**36.50 ± 0.71**"]
    assert (
        "over 2 seeds per cell" in text and "Protocol of every run in the table: fixed budget, max_steps=300." in text
    )
    assert "not averaged in: mydata/weighted, seed 1: another protocol (fixed budget, max_steps=400)" in text


def test_a_cell_pools_only_runs_that_differ_by_the_seed(tmp_path):
    for seed in (1, 2, 3):
        write_run(
            tmp_path,
            "wnut16",
            "average",
            seed,
            [0.41, 0.42, 0.43][seed - 1],
            protocol=PROTOCOL,
            converged=True,
            identity=identity(seed, **{"initialize.components.elmo.cache_dtype": "float16"}),
        )
    write_run(
        tmp_path,
        "wnut16",
        "average",
        4,
        0.2,
        protocol=PROTOCOL,
        converged=True,
        identity=identity(4, **{"initialize.components.elmo.cache_dtype": "float32"}),
    )
    write_run(tmp_path, "wnut16", "layer1", 1, 0.3, protocol={**PROTOCOL, "patience_epochs": 2}, converged=True)
    report = compare(tmp_path)
    text = report.outputs["table"].read_text()
    assert report.table.cells["wnut16", "average"].scores == [0.41, 0.42, 0.43]
    assert ("wnut16", "layer1") not in report.table.cells
    assert (
        "Protocol of every run in the table: architecture=paper, tokens=given, stopping=patience, patience_epochs=5, max_epochs=50."
        in text
    )
    assert (
        "not averaged in: wnut16/average, seed 4: its setup differs from the cell's other 3 runs in "
        "initialize.components.elmo.cache_dtype (float32, not float16)"
    ) in text
    assert (
        "not averaged in: wnut16/layer1, seed 1: another protocol (architecture=paper, tokens=given, stopping=patience, patience_epochs=2"
        in text
    )


def test_selection_reads_only_the_given_seeds_schemes_and_datasets(tmp_path):
    write_cell(tmp_path, "conll2003", "weighted", BEST)
    write_cell(tmp_path, "conll2003", "layer1", CLEARLY_WORSE)
    write_cell(tmp_path, "wnut16", "weighted", BEST)
    report = compare(tmp_path, datasets=["conll2003"], schemes=["weighted"], seeds=[1, 2, 3])
    assert list(report.table.cells) == [("conll2003", "weighted")]
    assert report.table.cells["conll2003", "weighted"].scores == BEST[:3]
    text = report.outputs["table"].read_text()
    assert "3 seeds per cell" in text and "layer1" not in text and "wnut16" not in text and "missing" not in text


def test_paper_row_converged_counts_and_marks_are_stated(tmp_path):
    for seed, score in enumerate(BEST, start=1):
        write_run(tmp_path, "conll2003", "layer2", seed, score, protocol=PROTOCOL, converged=seed != 5)
        write_run(tmp_path, "conll2003", "baseline", seed, score - 0.1, protocol=PROTOCOL, converged=True)
    write_cell(tmp_path, "mydata", "layer2", BEST, protocol=PROTOCOL)
    text = compare(tmp_path).outputs["table"].read_text()
    assert row_cells(text, "CoNLL-2003")[-1] == "9/10"
    assert row_cells(text, "↳ paper") == ["91.78", "–", "–"]  # layer2, baseline (not in the paper), converged
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    assert [line.split("|")[1].strip()[:10] for line in lines[1:]] == ["CoNLL-2003", "↳ paper (R", "mydata (`m"]
    assert "Welch's t-test, one-sided, p < 0.01" in text
    assert "Reimers & Gurevych 2019, Table 1 (arXiv 1904.02954): 5.5B ELMo, 10 seeds" in text
    assert "does not name its test" in text
    assert "not run here: ACE 2005 entities and events, and PTB constituency parsing (LDC licences" in text


def test_allennlp_rows_are_labelled_as_another_network(tmp_path):
    write_cell(tmp_path, "sst5", "layer2", [0.52, 0.53, 0.51], protocol=PROTOCOL)
    write_cell(tmp_path, "ud_ewt_parse", "layer2", [0.88, 0.87, 0.89], protocol=PROTOCOL)
    text = compare(tmp_path).outputs["table"].read_text()
    rows = [
        line for line in text.splitlines() if line.startswith("| ↳ paper, AllenNLP's model (Reimers & Gurevych 2019) |")
    ]
    assert sorted(row.split("|")[2].strip() for row in rows) == ["53.41", "94.10*"]  # layer2 of SST-5 and parsing
    assert "`sst5`: AllenNLP's biattentive classification network; ours is the paper's BiLSTM" in text
    assert "`ud_ewt_parse`: AllenNLP's constituency parser on the Penn Treebank" in text


def test_layer_weights_sit_under_the_layer_they_weigh(tmp_path):
    lw = lambda w: {"crf_ner": {"weights": w, "gamma": 1.0}}  # noqa: E731
    write_run(tmp_path, "wnut16", "layer2", 1, 0.5, layer_weights=lw([1.0]))
    write_run(tmp_path, "wnut16", "layer3", 1, 0.5, layer_weights=lw([1.0]))
    weights = compare(tmp_path).outputs["layer_weights"].read_text()
    assert "| `wnut16` | `layer2` | crf_ner | – | 1.000 | – | 1.000 | 1 |" in weights
    assert "| `wnut16` | `layer3` | crf_ner | – | – | 1.000 | 1.000 | 1 |" in weights


def test_cli_prints_the_table(tmp_path, capsys):
    write_cell(tmp_path, "wnut16", "weighted", BEST)
    assert compare_cli(["--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith((tmp_path / "table.md").read_text().rstrip())
    assert "| WNUT16" in out


def test_alpha_must_be_a_level(tmp_path, capsys):
    with pytest.raises(SystemExit):
        compare_cli(["--results", str(tmp_path), "--alpha", "1.5"])
    assert "--alpha must be a significance level between 0 and 1, got 1.5" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args,message",
    [
        (["--seeds", "99"], "match no run folder under"),
        (["--datasets", "conll2003", "--schemes", "layer1"], "match no run folder under"),
        (["--schemes", "weighted", "wieghted"], "--schemes wieghted: neither built in nor run under"),
        (["--datasets", "nope"], "--datasets nope: neither built in nor run under"),
    ],
)
def test_a_selection_that_can_only_be_a_mistake_fails_in_one_line(tmp_path, capsys, args, message):
    write_cell(tmp_path, "wnut16", "weighted", BEST[:2])
    assert cli(["compare", "--results", str(tmp_path), *args]) == 1
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "table.md").exists()


def test_runs_whose_inputs_are_not_here_are_not_tabulated_over_the_table(tmp_path, monkeypatch, capsys):
    """A fresh clone before ``convert``: the committed runs' corpus is not there, so they can be
    neither checked nor called out of date; compare says so in one line and writes nothing, while
    a changed corpus still only leaves its runs out."""
    monkeypatch.chdir(tmp_path)
    corpus = tmp_path / "corpus/wnut16/train.spacy"
    corpus.parent.mkdir(parents=True)
    corpus.write_bytes(b"corpus v1")
    digest = hashlib.sha256(b"corpus v1").hexdigest()
    for seed, score in enumerate(BEST[:2], start=1):
        recorded = {**identity(seed), "files": {"corpus/wnut16/train.spacy": digest}}
        write_run(tmp_path / "results", "wnut16", "weighted", seed, score, identity=recorded)
    write_run(tmp_path / "results", "conll2003", "weighted", 1, 0.9, identity=identity(1))
    assert compare("results").results.runs[-1].dataset == "wnut16"  # current: tabulated
    table = tmp_path / "results/table.md"
    before = table.read_bytes()
    corpus.unlink()
    assert cli(["compare", "--results", "results"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "error: cannot check the runs of wnut16 (corpus/wnut16/train.spacy not found): run their convert "
        "step (or restore the file) first, or leave them out of --datasets"
    ]
    assert table.read_bytes() == before
    assert cli(["compare", "--results", "results", "--datasets", "conll2003"]) == 0
    corpus.write_bytes(b"corpus v2")
    missing = compare("results").results.missing
    assert missing[("wnut16", "weighted", 1)].startswith("out of date: corpus/wnut16/train.spacy changed")

"""The report's page: ``index.html`` beside its PNG plots, the summary and tables in HTML."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from sqlheads.report.data import (
    QUEUE_TOP,
    ReportData,
    drift_words,
    figure_rows,
    load_report_data,
    queue_words,
    student_points,
)
from sqlheads.report.figures import draw, draw_students, pyplot
from sqlheads.store.figures import store_figures
from sqlheads.store.repository import Store


def build_report(
    store: Store, head: str, *, version: int | None = None, out_dir: str | Path | None = None
) -> dict[str, Any]:
    """Write ``index.html`` and its PNG plots for a version; store the figures' numbers. A
    head with students also gets their figure: teacher, students, frozen heads and the
    baseline, accuracy against rows/s (:func:`student_points`)."""
    data = load_report_data(store, head, version)
    rows = figure_rows(data)
    store_figures(store, data.model.model_id, rows)
    out = Path(out_dir) if out_dir is not None else Path(f"report-{head}-v{data.model.version}")
    out.mkdir(parents=True, exist_ok=True)
    plots = draw(data, out)
    if data.versions["teacher_accuracy"].notna().any():
        plt = pyplot()
        figure, ax = plt.subplots(figsize=(6.4, 4.4))
        draw_students(ax, head, *student_points(store, head))
        figure.tight_layout()
        plots["students"] = "students.png"
        figure.savefig(out / plots["students"], dpi=100)
        plt.close(figure)
    page = out / "index.html"
    page.write_text(render_html(data, plots), encoding="utf-8")
    return {
        "head": head,
        "version": data.model.version,
        "model_id": data.model.model_id,
        "html": str(page),
        "plots": [str(out / p) for p in plots.values()],
        "figure_rows": len(rows),
        "predictions": len(data.scores),
        "rows_test": int(data.record["rows_test"]),
    }


# Each figure's alt text (what it is) and caption (how to read it: the plot has its title).
CAPTIONS = {
    "confusion_matrix": (
        "Confusion matrix",
        "The held-out rows by true class (rows) and predicted class (columns): the diagonal "
        "holds what this version got right.",
    ),
    "per_class": (
        "Per-class precision, recall and F1",
        "For each class, on the held-out rows: the share of its predictions that were right "
        "(precision), of its rows that were found (recall), and their harmonic mean (F1).",
    ),
    "score_histogram": (
        "Score distribution",
        "How sure this version was of each label it wrote into predictions: the scores near "
        "the low end are its uncertain rows.",
    ),
    "loss_curve": (
        "Training loss",
        "The mean cross-entropy on the training rows after each epoch; a curve still falling "
        "at its end could use more epochs.",
    ),
    "versions": (
        "Versions of this head",
        "Held-out accuracy and macro-F1 of every version of the head, this one circled and "
        "the deployed one starred.",
    ),
    "baseline": (
        "This version beside its baseline",
        "This version and a TF-IDF + logistic regression model fitted on the same training "
        "rows and scored on the same held-out rows: a version below it is not worth its "
        "encoder.",
    ),
    "students": (
        "Teacher, students, heads and baseline",
        "Held-out accuracy against rows scored per second from text on this machine: up and "
        "to the right is better; the dashed line is the TF-IDF + LR baseline.",
    ),
    "queue_margin": (
        "Label queue margins",
        "The unlabelled rows the deployed version scored, by the gap between its two likeliest "
        "classes: sqlheads label-queue lists the left end first.",
    ),
    "drift_shares": (
        "Drift: class shares",
        "The share of each predicted class in every set scored, beside the training labels' "
        "shares: a set far from the training bars has drifted.",
    ),
}


def render_html(data: ReportData, plots: dict[str, str]) -> str:
    record, metrics = data.record, data.metrics
    deployed = bool(
        data.versions.loc[data.versions["model_id"] == data.model.model_id, "is_deployed"].any()
    )
    summary = {
        "head": data.model.head,
        "version": data.model.version,
        "deployed": "yes" if deployed else "no",
        "trained at": record["created_at"],
        "classes": ", ".join(data.classes),
        "held-out accuracy": f"{metrics['accuracy']:.4f}",
        "macro-F1": f"{metrics['macro_f1']:.4f}",
        "TF-IDF + LR baseline (accuracy / macro-F1)": (
            f"{metrics['baseline']['accuracy']:.4f} / {metrics['baseline']['macro_f1']:.4f}"
            if "accuracy" in metrics.get("baseline", {})
            else f"none: {metrics.get('baseline', {}).get('skipped', 'not recorded')}"
        ),
        "rows (train / test)": f"{record['rows_train']:,} / {record['rows_test']:,}",
        "training seconds": f"{record['seconds']:.2f}",
        "predictions of this version": f"{len(data.scores):,}",
    }
    parameters = [[k, _in_words(v)] for k, v in json.loads(record["params_json"]).items()]
    per_class = [
        [
            c,
            *(f"{metrics['per_class'][c][m]:.3f}" for m in ("precision", "recall", "f1")),
            str(metrics["per_class"][c]["support"]),
        ]
        for c in data.classes
    ]
    versions = [
        [
            str(r.version),
            "yes" if r.is_deployed else "",
            f"{r.accuracy:.4f}",
            f"{r.macro_f1:.4f}",
            f"{r.rows_train:,}",
            f"{r.rows_test:,}",
            str(r.created_at),
        ]
        for r in data.versions.itertuples(index=False)
    ]
    figures = "\n".join(
        f'<figure><img src="{html.escape(file)}" alt="{html.escape(CAPTIONS[name][0])}">'
        f"<figcaption>{html.escape(CAPTIONS[name][1])}</figcaption></figure>"
        for name, file in plots.items()
    )
    versions_table = _table(
        ["version", "deployed", "accuracy", "macro-F1", "rows train", "rows test", "trained"],
        versions,
    )
    title = f"{data.model.head} v{data.model.version}"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)} - sqlheads report</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem; color: #222; }}
table {{ border-collapse: collapse; margin-bottom: 1.5rem; }}
td, th {{ border: 1px solid #ccc; padding: 0.25rem 0.6rem; text-align: left; }}
figure {{ display: inline-block; margin: 0.5rem; width: 640px; vertical-align: top; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
{_table(["", ""], [[k, str(v)] for k, v in summary.items()], header=False)}
<h2>Parameters</h2>
{_table(["parameter", "value"], parameters)}
{figures}
<h2>Per class (held-out split)</h2>
{_table(["class", "precision", "recall", "F1", "support"], per_class)}
<h2>Versions</h2>
{versions_table}
{_loop_sections(data)}
<p>The numbers behind these plots are in the <code>model_figures</code> table
(model_id {data.model.model_id}); versions are in the <code>model_summary</code> view.</p>
</body></html>
"""


def _in_words(value: Any) -> str:
    """A parameter's value as a cell: a list's items, a mapping's ``name value`` pairs."""
    if isinstance(value, dict):
        return ", ".join(f"{k} {_in_words(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(map(_in_words, value))
    return "none" if value is None else str(value)


def _table(columns: list[str], rows: list[list[str]], *, header: bool = True) -> str:
    head = (
        "<tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in columns) + "</tr>" if header else ""
    )
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>" for row in rows
    )
    return f"<table>{head}{body}</table>"


def _loop_sections(data: ReportData) -> str:
    """The label queue's first rows and the drift of each set, as HTML."""
    if isinstance(data.queue, dict) and data.queue["rows"]:
        queue = _table(
            ["#", "item_key", "set", "predicted", "probability", "margin"],
            [
                [
                    str(r["queue_rank"]),
                    r["item_key"],
                    r["set"],
                    r["predicted_label"],
                    f"{r['probability']:.3f}",
                    f"{r['margin']:.3f}",
                ]
                for r in data.queue["rows"]
            ],
        )
    else:
        queue = f"<p>{html.escape(queue_words(data))}</p>"
    sets = data.drift["sets"] if isinstance(data.drift, dict) else []

    def shown(value: Any) -> str:
        return "not recorded" if value is None else f"{value:.3f}"

    drift_rows = [
        [
            r["set"],
            "yes" if r["drifted"] else "no",
            f"{r['rows_scored']:,}",
            f"{r['mean_top_probability']:.3f} / {shown(r['held_out_mean_top_probability'])}",
            shown(r["top_probability_psi"]),
            shown(r["largest_share_gap"]),
            shown(r["embedding_shift"]),
            "; ".join(r["reasons"]),
        ]
        for r in sets
    ]
    drifts = (
        _table(
            ["set", "drifted", "rows", "top p / held-out", "PSI", "share gap", "shift", "why"],
            drift_rows,
        )
        if drift_rows
        else f"<p>{html.escape(drift_words(data))}</p>"
    )
    return (
        f"<h2>Label queue (first {QUEUE_TOP} rows of <code>sqlheads label-queue</code>)</h2>\n"
        f"{queue}\n<h2>Drift (<code>sqlheads drift</code>)</h2>\n{drifts}"
    )

"""``sqlheads report``: the page, its plots, and the numbers stored in model_figures."""

from __future__ import annotations

import html
import json
import re

import numpy as np
import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

from sqlheads import host
from sqlheads.cli import app
from sqlheads.report import build_report, figures
from sqlheads.report.data import FIGURES, load_report_data
from sqlheads.report.figures import pyplot
from sqlheads.store import schema as s
from sqlheads.store.repository import Store
from sqlheads.verbs.drift import NO_SET_JUDGED
from sqlheads.verbs.label_queue import EMPTY_QUEUE

HEAD = "rt_sentiment"
LABELS = "SELECT item_key, label FROM reviews"
PNG = b"\x89PNG\r\n\x1a\n"


def figure_values(store: Store, model_id: int, figure: str) -> list[float]:
    with store.engine.connect() as connection:
        return [
            r.value
            for r in connection.execute(
                select(s.model_figures.c.value).where(
                    s.model_figures.c.model_id == model_id, s.model_figures.c.figure == figure
                )
            )
        ]


def figure_count(store: Store) -> int:
    with store.engine.connect() as connection:
        return connection.execute(select(func.count()).select_from(s.model_figures)).scalar_one()


@pytest.fixture
def trained(embedded: Store) -> Store:
    """Like the demo: a head trained on every labelled row, deployed, the set scored; then a
    second, undeployed version to compare with."""
    host.train(embedded, head=HEAD, set_name="reviews", labels=LABELS, deploy="always")
    host.predict(embedded, head=HEAD, set_name="reviews")
    host.train(embedded, head=HEAD, set_name="reviews", labels=LABELS, epochs=5, deploy="never")
    return embedded


@pytest.mark.slow
def test_report_writes_the_page_and_the_figures_numbers(trained: Store, rt_sample, tmp_path):
    result = build_report(trained, HEAD, out_dir=tmp_path / "report")

    assert result["version"] == 1  # the deployed version by default
    page = tmp_path / "report" / "index.html"
    assert page.is_file()
    text = page.read_text(encoding="utf-8")
    for name in FIGURES:
        png = tmp_path / "report" / f"{name}.png"
        assert png.read_bytes()[:8] == PNG
        assert f'src="{name}.png"' in text

    record = trained.model_record(result["model_id"])
    rows_test = record["rows_test"]
    assert rows_test == round(0.2 * len(rt_sample))
    matrix = json.loads(record["metrics_json"])["confusion_matrix"]
    assert sum(map(sum, matrix)) == rows_test
    assert sum(figure_values(trained, result["model_id"], "confusion_matrix")) == rows_test
    histogram = figure_values(trained, result["model_id"], "score_histogram")
    assert sum(histogram) == len(rt_sample) == result["predictions"]
    losses = json.loads(record["loss_curve_json"])
    with trained.engine.connect() as connection:
        points = dict(
            connection.execute(
                select(s.model_figures.c.x, s.model_figures.c.value).where(
                    s.model_figures.c.model_id == result["model_id"],
                    s.model_figures.c.figure == "loss_curve",
                )
            ).all()
        )
    assert [points[str(epoch)] for epoch in range(1, len(losses) + 1)] == pytest.approx(losses)
    # precision, recall and F1 of each class: those of the stored held-out confusion matrix
    with trained.engine.connect() as connection:
        per_class = {
            (r.series, r.x): r.value
            for r in connection.execute(
                select(
                    s.model_figures.c.series, s.model_figures.c.x, s.model_figures.c.value
                ).where(
                    s.model_figures.c.model_id == result["model_id"],
                    s.model_figures.c.figure == "per_class",
                )
            )
        }
    classes, counts = json.loads(record["classes_json"]), np.array(matrix)  # true x predicted
    assert len(per_class) == 3 * len(classes) == 3 * 2
    for i, name in enumerate(classes):
        precision, recall = counts[i, i] / counts[:, i].sum(), counts[i, i] / counts[i].sum()
        assert per_class[("precision", name)] == pytest.approx(precision)
        assert per_class[("recall", name)] == pytest.approx(recall)
        assert per_class[("f1", name)] == pytest.approx(
            2 * precision * recall / (precision + recall)
        )

    stored = figure_count(trained)
    build_report(trained, HEAD, out_dir=tmp_path / "again")
    assert figure_count(trained) == stored  # a re-run replaces, never duplicates


@pytest.mark.slow
def test_report_command_for_a_named_version(trained: Store, tmp_path):
    url = trained.engine.url.render_as_string(hide_password=False)
    out = tmp_path / "v2"
    result = CliRunner().invoke(
        app, ["--url", url, "--json", "report", "--head", HEAD, "--version", "2", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    reported = json.loads(result.output)
    assert reported["version"] == 2 and reported["predictions"] == 0
    assert (out / "index.html").is_file() and (out / "score_histogram.png").is_file()
    record = trained.model_record(reported["model_id"])
    confusion = figure_values(trained, reported["model_id"], "confusion_matrix")
    assert sum(confusion) == record["rows_test"]
    assert figure_values(trained, reported["model_id"], "score_histogram") == []


def test_report_of_an_unknown_head_is_a_numbered_error(store: Store, tmp_path):
    url = store.engine.url.render_as_string(hide_password=False)
    result = CliRunner().invoke(
        app, ["--url", url, "--json", "report", "--head", "nobody", "--out", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert json.loads(result.output)["number"] == 50001


@pytest.mark.slow
def test_versions_plot_draws_equal_scores_as_equal(embedded: Store):
    for _ in range(3):  # same rows, same seed: three equal versions
        host.train(embedded, head=HEAD, set_name="reviews", labels=LABELS, epochs=3)
    data = load_report_data(embedded, HEAD)
    assert data.versions["accuracy"].nunique() == 1
    # The demo's figures: accuracy and macro-F1 apart only in the 6th digit.
    data.versions = data.versions.assign(accuracy=0.78253223915592, macro_f1=0.782523197660734)
    figure, ax = pyplot().subplots()
    try:
        figures._versions(ax, data)
        figure.canvas.draw()
        assert ax.yaxis.get_major_formatter().get_offset() == ""  # no "1e-6 + 7.8e-1"
        low, high = ax.get_ylim()
        assert 0 <= low < data.versions["accuracy"].iloc[0] < high <= 1 and high - low >= 0.1
    finally:
        pyplot().close(figure)


def _figures(page: str) -> dict[str, tuple[str, str]]:
    """{figure: (its img alt, its figcaption)} of a report page."""
    found = re.findall(
        r'<img src="(\w+)\.png" alt="([^"]*)"><figcaption>(.*?)</figcaption>', page, re.S
    )
    return {name: (alt, html.unescape(caption)) for name, alt, caption in found}


@pytest.mark.slow
def test_the_page_says_in_words_what_the_cli_says(trained: Store, tmp_path):
    """The demo's case (issue 38): every labelled row was trained on, so the queue is empty and
    no set is judged for drift; the page says so in the CLI's words, never as a Python dict, and
    lists the parameters as a table, not as JSON."""
    result = build_report(trained, HEAD, out_dir=tmp_path / "report")
    page = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    words = html.unescape(re.sub(r"<[^>]+>", " ", page))
    assert "{'" not in words and "'rows'" not in words, words
    assert EMPTY_QUEUE in words and NO_SET_JUDGED in words, words
    assert '{"recipe"' not in words
    params = json.loads(trained.model_record(result["model_id"])["params_json"])
    for name, value in params.items():
        assert re.search(rf"<td>{name}</td><td>{re.escape(str(value))}</td>", page), name


@pytest.mark.slow
def test_each_caption_says_more_than_its_plots_title(trained: Store, tmp_path):
    build_report(trained, HEAD, out_dir=tmp_path / "report")
    shown = _figures((tmp_path / "report" / "index.html").read_text(encoding="utf-8"))
    assert set(shown) == set(FIGURES)
    data = load_report_data(trained, HEAD)
    for name in FIGURES:
        figure, ax = pyplot().subplots()
        try:
            figures.DRAWERS[name](ax, data)
            title = ax.get_title().lower()
        finally:
            pyplot().close(figure)
        caption = shown[name][1].lower()
        assert len(caption.split()) >= 8, (name, caption)
        if title:
            assert title not in caption and caption not in title, (name, title, caption)

"""`sqlheads plot` writes real PNGs (issue 20, point 5): a head's versions over time, its
students against their teacher (rows/s measured by scoring), a job's progress. Real store,
real heads, a word student distilled from a real head's logits, a real queued job."""

from __future__ import annotations

import json
import struct

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from sqlheads import host, plots
from sqlheads.cli import app
from sqlheads.engine import kinds
from sqlheads.report import data as report_data
from sqlheads.report import figures
from sqlheads.sidecar.requests import request_embed
from sqlheads.store.repository import Store
from sqlheads.store.vectors import unpack_rows

runner = CliRunner()
PNG = b"\x89PNG\r\n\x1a\n"
LABELS = "SELECT item_key, label FROM reviews"


def _plot(url: str, *args: str) -> dict:
    result = runner.invoke(app, ["--url", url, "--json", "plot", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_plots_are_written(embedded: Store, rt_sample: pd.DataFrame, tmp_path):
    host.train(embedded, head="sentiment", set_name="reviews", labels=LABELS, epochs=3)
    model = embedded.find_model("sentiment", 1)
    head = kinds.model_kind("head").load(embedded.model_blob(model.model_id))
    keys = rt_sample["item_key"].tolist()
    vectors = embedded.vectors_for_keys(embedded.require_set("reviews").set_id, keys)
    logits = np.log(head.predict_proba(unpack_rows([vectors[k] for k in keys], 384)) + 1e-6)
    pd.DataFrame({"item_key": keys, "negative": logits[:, 0], "positive": logits[:, 1]}).to_sql(
        "teacher_logits", embedded.engine, index=False
    )
    host.distill(
        embedded,
        head="sentiment",
        set_name="reviews",
        labels=LABELS,
        soft_labels="SELECT item_key, negative, positive FROM teacher_logits",
        student="word",
        epochs=2,
    )
    job = request_embed(
        embedded, set_name="later", source="SELECT item_key, text FROM reviews", parts=2
    )
    url = str(embedded.engine.url)

    versions = _plot(url, "versions", "--head", "sentiment", "--out", str(tmp_path / "v.png"))
    assert versions["versions"] == 2
    students = _plot(url, "students", "--head", "sentiment", "--out", str(tmp_path / "s.png"))
    kinds_seen = {p["kind"]: p["rows_per_second"] for p in students["points"]}
    assert set(kinds_seen) == {"head", "word_student"} and min(kinds_seen.values()) > 0
    job_id = job["job_ids"][0]
    _plot(url, "job", "--job-id", str(job_id), "--out", str(tmp_path / "j.png"))
    for name in ("v.png", "s.png", "j.png"):
        data = (tmp_path / name).read_bytes()
        assert data[:8] == PNG and len(data) > 5_000, name
    # an embed job has no loss curve: one panel, as wide as the other plots (640 px at 100 dpi)
    width, height = struct.unpack(">II", (tmp_path / "j.png").read_bytes()[16:24])
    assert width == 640 and height < 440, (width, height)
    # every version's label lies inside the axes, whatever its point's place
    points, baseline = report_data.student_points(embedded, "sentiment")
    plt = figures.pyplot()
    figure, ax = plt.subplots(figsize=plots.SIZE)
    figures.draw_students(ax, "sentiment", points, baseline)
    figure.canvas.draw()
    frame = ax.get_window_extent()
    labels = [text for text in ax.texts if " v" in text.get_text()]
    assert len(labels) >= 2
    for text in labels:
        box = text.get_window_extent()
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1, text.get_text()
        assert frame.y0 <= box.y0 and box.y1 <= frame.y1, text.get_text()
    plt.close(figure)

    refused = runner.invoke(app, ["--url", url, "--json", "plot", "job", "--job-id", "999"])
    assert refused.exit_code == 2 and json.loads(refused.stdout)["number"] == 50001


def test_the_students_legend_lists_only_what_is_drawn(embedded: Store):
    """A head with no student and no teacher (issue 38: the legend listed teacher and student
    markers that were not drawn)."""
    host.train(embedded, head="sentiment", set_name="reviews", labels=LABELS, epochs=3)
    points, baseline = report_data.student_points(embedded, "sentiment")
    plt = figures.pyplot()
    figure, ax = plt.subplots(figsize=plots.SIZE)
    try:
        figures.draw_students(ax, "sentiment", points, baseline)
        shown = [text.get_text() for text in ax.get_legend().get_texts()]
    finally:
        plt.close(figure)
    assert shown == ["head", "TF-IDF + LR baseline"], shown

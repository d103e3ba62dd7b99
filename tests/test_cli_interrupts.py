"""Ctrl-C in every long verb (embed, train, distill, predict, the demo): exit 130 without a
traceback, a sentence that says what was kept and that the same command goes on. Real SIGINTs to
real processes where a terminal sends them."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import versions_of
from typer.testing import CliRunner

from sqlheads.cli import app
from sqlheads.cli.render import ProgressLines
from sqlheads.engine.heads import HeadClassifier
from sqlheads.store.repository import Store
from sqlheads.verbs import predict as predict_verb


def _interrupted(url: str, arguments: list[str], first_line: str) -> str:
    """Run ``sqlheads --url URL ARGUMENTS`` as at a terminal, send a real SIGINT once stderr
    shows a line matching ``first_line``, and return what it said; it must exit 130 without a
    traceback."""
    process = subprocess.Popen(
        [sys.executable, "-m", "sqlheads.cli", "--url", url, *arguments],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
        # as at a terminal: a test run in the background (nohup, &) inherits SIGINT ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    seen = []
    for line in process.stderr:
        seen.append(line)
        if re.search(first_line, line):
            break
    process.send_signal(signal.SIGINT)
    _, said = process.communicate(timeout=300)
    said = "".join(seen) + said
    assert process.returncode == 130, said
    assert "Traceback" not in said
    return " ".join(said.split())


def test_ctrl_c_during_embed_says_what_was_committed_and_how_to_finish(embedded: Store):
    """A real SIGINT after the first committed batch: exit 130, a sentence on stderr with the
    rows committed and the command that finishes the rest; the committed rows are there."""
    url = str(embedded.engine.url)
    with embedded.engine.begin() as connection:  # more rows than one batch, slow enough
        connection.exec_driver_sql(
            "CREATE TABLE many AS SELECT item_key || '-' || n AS item_key, text FROM reviews, "
            "(SELECT 1 AS n UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4)"
        )
    said = _interrupted(
        url,
        ["embed", "--set", "many", "--source", "SELECT item_key, text FROM many"]
        + ["--batch-rows", "50"],
        r"embedding many: [\d,]+ of",  # the first progress line comes after the first commit
    )
    committed = re.search(r"interrupted: ([\d,]+) of ([\d,]+) rows? (?:were|was) committed", said)
    assert committed, said
    assert "run the same command again" in said
    with embedded.engine.connect() as connection:
        stored = connection.exec_driver_sql(
            "SELECT COUNT(*) FROM embeddings JOIN embedding_sets USING (set_id) "
            "WHERE embedding_sets.name = 'many'"
        ).scalar_one()
    assert stored >= int(committed.group(1).replace(",", "")) > 0


@pytest.fixture
def taught(taught_template: Path, copy_database) -> Store:
    """The embedded sample with a teacher's logits in table teacher_logits (a copy)."""
    return copy_database(taught_template)


LABELS = ["--labels", "SELECT item_key, label FROM reviews"]
SOFT_LABELS = ["--soft-labels", "SELECT item_key, negative, positive FROM teacher_logits"]


@pytest.mark.parametrize(
    ("head", "arguments", "stage", "epochs"),
    [
        ("long", ["train", "--recipe", "full", "--epochs", "10000", *LABELS], "training", "10,000"),
        (
            "student",
            ["distill", "--student", "head", "--epochs", "1000", *LABELS, *SOFT_LABELS],
            "distilling",
            "1,000",
        ),
    ],
    ids=["train", "distill"],
)
def test_ctrl_c_during_train_or_distill_says_no_version_was_written_and_to_run_it_again(
    taught: Store, head: str, arguments: list[str], stage: str, epochs: str
):
    verb, *options = arguments
    said = _interrupted(
        str(taught.engine.url),
        [verb, "--head", head, "--set", "reviews", *options],
        rf"{stage} {head}: [\d,]+ of {epochs} epochs",
    )
    assert re.search(rf"interrupted after [\d,]+ of {epochs} epochs", said), said
    assert f"no version of head {head} was written" in said, said
    assert "run the same command again" in said, said
    assert versions_of(taught, head) == []


def test_training_announces_its_start_once_its_libraries_are_imported(taught: Store):
    """The first "training HEAD: 0 of N epochs" line comes after torch and scikit-learn are
    imported: a Ctrl-C at that line lands in the training loop, not inside those imports, where
    one was lost in CI and the training ran on to exit 0 (stop 46)."""
    url = str(taught.engine.url)
    command = [sys.executable, "-X", "importtime", "-m", "sqlheads.cli", "--url", url]
    training = ["train", "--head", "short", "--set", "reviews", "--recipe", "full"]
    process = subprocess.run(
        [*command, *training, "--epochs", "5", *LABELS],
        capture_output=True,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
        timeout=300,
    )
    assert process.returncode == 0, process.stderr
    lines = process.stderr.splitlines()
    started = next(i for i, line in enumerate(lines) if line.startswith("training short: 0 of"))
    ended = next(i for i, line in enumerate(lines) if line.startswith("training short: 5 of"))
    imported_in_training = [line.split("|")[-1].strip() for line in lines[started + 1 : ended]]
    # torch's first optimizer step imports its profiler's CUPTI monitor (record_function): one
    # module of torch's own; before the fix, torch and scikit-learn (~700 modules) came here
    libraries = [name for name in imported_in_training if not name.startswith("torch.profiler")]
    assert libraries == [], libraries[:10]


def test_a_ctrl_c_that_a_library_swallowed_stops_training_at_its_next_report(
    taught: Store, monkeypatch
):
    """A real SIGINT caught on its way by a bare ``except`` (as inside a library's import): the
    command still stops at its next progress report, exit 130, and writes no version."""
    fit = HeadClassifier.fit

    def swallowing(head: HeadClassifier, *args, **kwargs) -> HeadClassifier:
        with contextlib.suppress(KeyboardInterrupt):  # as a library's bare except does
            signal.raise_signal(signal.SIGINT)
        return fit(head, *args, **kwargs)

    monkeypatch.setattr(HeadClassifier, "fit", swallowing)
    # as at a terminal: Python's own handler (a pytest worker may run with another)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        result = runner.invoke(
            app,
            [
                "--url",
                str(taught.engine.url),
                "train",
                "--head",
                "long",
                "--set",
                "reviews",
                "--epochs",
                "50",
                *LABELS,
            ],  # fmt: skip
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    said = " ".join(result.output.split())
    assert result.exit_code == 130, said
    assert "interrupted after 0 of 50 epochs" in said, said
    assert versions_of(taught, "long") == []


runner = CliRunner()


class _CtrlCAt:
    """The progress lines a command draws, with Ctrl-C pressed right after the ``at``-th report
    of the stage named ``stage`` (a report follows a committed batch)."""

    def __init__(self, monkeypatch, stage: str, at: int) -> None:
        self.reports, self.stage, self.at = 0, stage, at
        draw = ProgressLines.__call__

        def drawn(lines: ProgressLines, done: int, total: int | None, stage=None) -> None:
            draw(lines, done, total, stage)
            if lines.label == self.stage and done:
                self.reports += 1
                if self.reports == self.at:
                    raise KeyboardInterrupt

        monkeypatch.setattr(ProgressLines, "__call__", drawn)


def test_ctrl_c_during_predict_says_how_many_rows_were_scored(embedded: Store, monkeypatch):
    url = str(embedded.engine.url)
    labels = "SELECT item_key, label FROM reviews"
    trained = runner.invoke(app, ["--url", url, "train", "--head", "h", "--set", "reviews",
                                  "--labels", labels])  # fmt: skip
    assert trained.exit_code == 0, trained.output
    monkeypatch.setattr(predict_verb, "READ_ROWS", 100)  # 6 chunks of the 600 rows
    _CtrlCAt(monkeypatch, "scoring reviews", at=2)
    result = runner.invoke(app, ["--url", url, "predict", "--head", "h", "--set", "reviews"])
    said = " ".join(result.output.split())
    assert result.exit_code == 130, said
    assert "interrupted: 200 of 600 rows were scored and written" in said, said
    assert "run the same command again" in said, said
    with embedded.engine.connect() as c:
        assert c.exec_driver_sql("SELECT COUNT(*) FROM predictions").scalar_one() == 200


def test_ctrl_c_during_the_demo_says_what_stays_and_that_a_rerun_goes_on(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SQLHEADS_SAMPLE_ROWS", "400")
    _CtrlCAt(monkeypatch, "embedding rt_reviews", at=1)
    result = runner.invoke(app, ["demo"], env={"SQLHEADS_SAMPLE_ROWS": "400"})
    said = " ".join(result.output.split())
    assert result.exit_code == 130, said
    assert "400 of 400 rows embedded in set rt_reviews" in said, said
    assert "no version of head rt_sentiment" in said, said
    assert "run sqlheads demo again to go on" in said.replace("`", ""), said

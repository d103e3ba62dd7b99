"""A newcomer's second hour (issue 38): URL forms a person types, Ctrl-C in every long verb,
progress that counts the rows really processed, one count of rejects, a head's versions on
one encoder, and the lock folder out of sight. Real SQLite files, the real CLI, real encoders."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sqlheads import host
from sqlheads.cli import app
from sqlheads.cli.app import in_words
from sqlheads.cli.render import ProgressLines
from sqlheads.store.repository import SET_BUSY, Store
from sqlheads.verbs import predict as predict_verb
from sqlheads.verbs.drift import NO_SET_JUDGED

runner = CliRunner()


def _error(*arguments: str) -> dict:
    result = runner.invoke(app, ["--json", *arguments])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return json.loads(result.stdout)


# -- URL forms -----------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["models", "init"])
def test_a_sqlite_url_with_two_slashes_names_the_three_slash_form(tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    error = _error("--url", "sqlite://my.db", command)
    assert error["number"] == 50030
    assert "sqlite:///my.db" in error["error"], error
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["models", "init"])
def test_a_folder_as_the_sqlite_file_names_a_file_inside_it(tmp_path, command):
    folder = tmp_path / "stores"
    folder.mkdir()
    error = _error("--url", f"sqlite:///{folder}", command)
    assert error["number"] == 50013
    assert "is a folder" in error["error"] and f"sqlite:///{folder}/" in error["error"], error
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("command", ["models", "init"])
def test_a_file_that_is_not_sqlite_is_named_and_left_alone(tmp_path, command):
    notes = tmp_path / "notes.txt"
    notes.write_text("a shopping list, not a database\n")
    error = _error("--url", f"sqlite:///{notes}", command)
    assert error["number"] == 50013
    assert str(notes) in error["error"] and "not a SQLite database" in error["error"], error
    assert "sqlite:///" in error["error"]
    assert notes.read_text() == "a shopping list, not a database\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_an_empty_file_is_a_new_sqlite_store(tmp_path):
    """SQLite treats an empty file as an empty database: touch-then-init stays allowed."""
    empty = tmp_path / "empty.db"
    empty.touch()
    result = runner.invoke(app, ["--url", f"sqlite:///{empty}", "init"])
    assert result.exit_code == 0, result.output


# -- the lock folder ---------------------------------------------------------------------------


def _git(folder, *arguments: str) -> str:
    return subprocess.run(
        ["git", *arguments], cwd=folder, capture_output=True, text=True, check=True
    ).stdout


def test_the_lock_folder_is_hidden_and_out_of_a_users_git_status(tmp_path):
    """A store in a folder under git (the user's, without our .gitignore): after a verb took
    its locks, nothing but the store itself is new to ``git status``, and ``ls`` shows no lock
    folder."""
    _git(tmp_path, "init", "-q")
    url = f"sqlite:///{tmp_path / 'notes.db'}"
    assert runner.invoke(app, ["--url", url, "init"]).exit_code == 0
    Store.from_url(url).engine.dispose()
    with Store.from_url(url).lock("set", "reviews", 0, SET_BUSY):
        pass
    untracked = _git(tmp_path, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert [line for line in untracked if "notes.db" not in line or "lock" in line] == []
    shown = [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")]
    assert set(shown) <= {"notes.db", "notes.db-wal", "notes.db-shm"}, shown  # SQLite's own


def test_the_projects_gitignore_ignores_the_demos_lock_folder():
    root = Path(__file__).resolve().parents[1]
    for path in ("sqlheads-demo.db.locks/set.x.rwlock", ".sqlheads-demo.db.locks/set.x.rwlock"):
        assert _git(root, "check-ignore", "--no-index", path).strip() == path, path


# -- Ctrl-C in the long verbs ------------------------------------------------------------------


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


def _versions(store: Store, head: str) -> list[int]:
    return sorted(store.read_view("model_summary", head=head)["version"].tolist())


def test_ctrl_c_during_train_says_no_version_was_written_and_to_run_it_again(embedded: Store):
    url = str(embedded.engine.url)
    said = _interrupted(
        url,
        ["train", "--head", "long", "--set", "reviews", "--recipe", "full", "--epochs", "10000"]
        + ["--labels", "SELECT item_key, label FROM reviews"],
        r"training long: [\d,]+ of 10,000 epochs",
    )
    assert re.search(r"interrupted after [\d,]+ of 10,000 epochs", said), said
    assert "no version of head long was written" in said, said
    assert "run the same command again" in said, said
    assert _versions(embedded, "long") == []


def test_ctrl_c_during_distill_says_no_version_was_written(taught: Store):
    url = str(taught.engine.url)
    said = _interrupted(
        url,
        ["distill", "--head", "student", "--set", "reviews", "--student", "head"]
        + ["--labels", "SELECT item_key, label FROM reviews", "--epochs", "1000"]
        + ["--soft-labels", "SELECT item_key, negative, positive FROM teacher_logits"],
        r"distilling student: [\d,]+ of 1,000 epochs",
    )
    assert re.search(r"interrupted after [\d,]+ of 1,000 epochs", said), said
    assert "no version of head student was written" in said, said
    assert "run the same command again" in said, said
    assert _versions(taught, "student") == []


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


@pytest.fixture
def taught(taught_template: Path, copy_database) -> Store:
    """The embedded sample with a teacher's logits in table teacher_logits (a copy)."""
    return copy_database(taught_template)


# -- progress that counts the rows processed ---------------------------------------------------


def _demo(folder: Path, monkeypatch, rows: int = 300) -> tuple[dict, str]:
    """``sqlheads --json demo`` on a sample of ``rows`` in ``folder``: its JSON and stderr."""
    monkeypatch.chdir(folder)
    monkeypatch.setenv("SQLHEADS_SAMPLE_ROWS", str(rows))
    result = runner.invoke(app, ["--json", "demo"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


def _last_rate(said: str, stage: str) -> str | None:
    lines = [line for line in said.splitlines() if line.startswith(f"{stage}:")]
    assert lines, said
    found = re.search(r", ([\d,.]+ [\w/]+)$", lines[-1])
    return found.group(1) if found else None


def test_the_demos_embedding_rate_is_the_rate_its_progress_showed(tmp_path, monkeypatch):
    first, said = _demo(tmp_path, monkeypatch)
    shown = _last_rate(said, "embedding rt_reviews")
    assert shown is not None and shown.endswith(" rows/s"), said
    shown_rate = float(shown.split()[0].replace(",", ""))
    assert first["embedded"] == 300
    # the same rows over the same seconds: from the first batch read to the last committed
    assert first["embed_rows_per_second"] == pytest.approx(shown_rate, rel=0.05), (first, said)


def test_a_rerun_that_embeds_nothing_claims_no_rate(tmp_path, monkeypatch):
    _demo(tmp_path, monkeypatch)
    again, said = _demo(tmp_path, monkeypatch)
    assert (again["embedded"], again["unchanged"]) == (0, 300)
    assert "embedding rt_reviews: 0 of 0 rows: nothing to do" in said, said
    assert _last_rate(said, "embedding rt_reviews") is None, said
    assert again["embed_rows_per_second"] is None


def test_a_rate_under_one_a_second_is_given_as_seconds_each(capsys):
    clock = [0.0]
    lines = ProgressLines("distilling student", "epochs", clock=lambda: clock[0])
    lines(0, 3)
    for epoch in (1, 2, 3):
        clock[0] += 50.0
        lines(epoch, 3)
    last = capsys.readouterr().err.splitlines()[-1]
    assert last == "distilling student: 3 of 3 epochs (100 %), 50.0 s/epoch", last


# -- one count of rejects -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rows", "rejects"),
    [
        # 20 keys given twice: 20 rejects, one a key, every copy refused
        ([(f"k{n % 20}", f"text {n}") for n in range(40)] + [("fine", "a fine film")], 20),
        # 100 rows without a key: the one reject under the empty key
        ([(None, f"text {n}") for n in range(100)] + [("fine", "a fine film")], 1),
    ],
    ids=["duplicated keys", "NULL keys"],
)
def test_one_count_of_rejects_in_the_run_the_set_and_the_table(store: Store, rows, rejects):
    with store.engine.begin() as c:
        c.exec_driver_sql("CREATE TABLE notes (item_key TEXT, text TEXT)")
        c.exec_driver_sql("INSERT INTO notes VALUES (?, ?)", rows)
    url = str(store.engine.url)
    result = runner.invoke(app, ["--url", url, "--json", "embed", "--set", "notes",
                                 "--source", "SELECT item_key, text FROM notes"])  # fmt: skip
    assert result.exit_code == 0, result.output
    said = json.loads(result.stdout)
    with store.engine.connect() as c:
        in_table = c.exec_driver_sql("SELECT COUNT(*) FROM rejects").scalar_one()
    assert (said["rejected"], said["set_rejects"], in_table) == (rejects,) * 3, said
    assert (said["rows_read"], said["embedded"]) == (len(rows), 1)


# -- a head's versions on one encoder -------------------------------------------------------------


def test_train_refuses_a_set_of_another_encoder_than_the_heads_versions(embedded: Store):
    """v1 on the default encoder's set; a set of another encoder (MiniLM in fp32, a second
    encoder of the store) is refused for v2, naming both encoders and both ways out, until the
    change is asked for."""
    url = str(embedded.engine.url)
    labels = "SELECT item_key, label FROM reviews"
    host.train(embedded, head="h", set_name="reviews", labels=labels, epochs=2)
    host.register_encoder(embedded, name="minilm-fp32", quantization="none")
    host.embed(
        embedded, set_name="reviews_fp32", source="SELECT item_key, text FROM reviews",
        encoder="minilm-fp32",
    )  # fmt: skip
    train = ["--url", url, "--json", "train", "--head", "h", "--set", "reviews_fp32"]
    train += ["--labels", labels, "--epochs", "2"]
    refused = runner.invoke(app, train)
    assert refused.exit_code == 2, refused.output
    error = json.loads(refused.stdout)
    assert error["number"] == 50007, error
    said = error["error"]
    for named in ("all-MiniLM-L6-v2-int8", "minilm-fp32", "--allow-encoder-change", "--head"):
        assert named in said, said
    assert _versions(embedded, "h") == [1]
    changed = runner.invoke(app, [*train, "--allow-encoder-change"])
    assert changed.exit_code == 0, changed.output
    assert json.loads(changed.stdout)["version"] == 2


def test_train_on_the_heads_own_encoder_needs_no_option(embedded: Store):
    labels = "SELECT item_key, label FROM reviews"
    for version in (1, 2):
        trained = host.train(embedded, head="h", set_name="reviews", labels=labels, epochs=2)
        assert trained["version"] == version


# -- words, not data structures -------------------------------------------------------------------


def test_listings_and_results_say_in_words_what_is_empty(embedded: Store):
    """A head trained on every labelled row: no queue, no set to judge for drift, each said in
    a sentence that names what to do; a result's mapping is printed as words, not JSON."""
    url = str(embedded.engine.url)
    labels = "SELECT item_key, label FROM reviews"
    host.train(embedded, head="h", set_name="reviews", labels=labels, epochs=2, deploy="always")
    host.predict(embedded, head="h", set_name="reviews")
    drift = runner.invoke(app, ["--url", url, "drift", "--head", "h"], env={"COLUMNS": "200"})
    assert drift.exit_code == 0, drift.output
    assert NO_SET_JUDGED in " ".join(drift.output.split()), drift.output
    assert in_words({"load": 2.58, "embed": None, "classes": ["a", "b"]}) == (
        "load 2.58, embed -, classes a, b"
    )

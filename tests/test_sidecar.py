"""The sidecar on a real SQLite file with the real MiniLM int8 encoder: embed jobs in parts,
two sidecar processes at once, a sidecar killed mid-job, cancels, retries and refusals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
import torch
from conftest import silent_for
from sqlalchemy import select, update
from typer.testing import CliRunner

from sqlheads import host
from sqlheads.cli import app
from sqlheads.errors import DeviceUnavailableError, JobStateError
from sqlheads.sidecar.requests import cancel_job, jobs, request_embed
from sqlheads.sidecar.worker import WORK, Sidecar, SidecarOptions
from sqlheads.store import schema as s
from sqlheads.store.jobs import JobQueue
from sqlheads.store.repository import Store
from sqlheads.verbs import encoders

SOURCE = "SELECT item_key, text FROM reviews"
runner = CliRunner()


@pytest.fixture
def reviews(store: Store, rt_sample: pd.DataFrame) -> Store:
    """60 real reviews, plus a row with no text and a key given twice (both rejected)."""
    rows = rt_sample.head(60)[["item_key", "text"]]
    odd = pd.DataFrame(
        {"item_key": ["empty", "twice", "twice"], "text": ["  ", "one copy", "another copy"]}
    )
    pd.concat([rows, odd]).to_sql("reviews", store.engine, index=False)
    return store


def _set_rows(store: Store, set_name: str) -> tuple[dict, dict]:
    """Key -> (text hash, vector bytes, windows), and key -> reject reason, of one set."""
    found = store.require_set(set_name)
    e, r = s.embeddings.c, s.rejects.c
    with store.engine.connect() as c:
        vectors = {
            k: (h, bytes(v), w)
            for k, h, v, w in c.execute(
                select(e.item_key, e.text_sha256, e.vector, e.windows).where(
                    e.set_id == found.set_id
                )
            )
        }
        rejects = dict(
            c.execute(select(r.item_key, r.reason).where(r.set_id == found.set_id)).all()
        )
    return vectors, rejects


def _assert_same_rows(store: Store, one: str, other: str) -> None:
    """The same keys, text hashes, windows and rejects, and the same vector bytes: the int8
    encoder quantises each row on its own scale, so a text's vector does not depend on which
    texts share its batch (issue 35; with one scale per batch, a plain ``embed`` of 60 reviews
    with batch_rows 25 instead of 1000 gave cosines down to 0.982)."""
    (vectors, rejects), (plain, plain_rejects) = _set_rows(store, one), _set_rows(store, other)
    assert rejects == plain_rejects
    assert {k: (h, w) for k, (h, _, w) in vectors.items()} == {
        k: (h, w) for k, (h, _, w) in plain.items()
    }
    keys = sorted(vectors)
    assert [vectors[k][1] for k in keys] == [plain[k][1] for k in keys]


def _sidecar(store: Store, **options) -> dict:
    return Sidecar(store, SidecarOptions(device="cpu", once=True, **options)).run()


def test_every_job_kind_the_queue_accepts_has_its_work_and_no_other() -> None:
    # schema.JOB_KINDS (the queue's check constraint) decides the kinds; WORK runs them.
    assert set(WORK) == set(s.JOB_KINDS)


def test_embed_in_parts_gives_the_vectors_of_a_plain_embed(reviews: Store) -> None:
    """Parts split by key quantiles; a plain embed whose batches are the same rows (the
    ordered source in batches of 31) writes the very same bytes, hashes and rejects."""
    ordered = f"{SOURCE} ORDER BY item_key"
    requested = request_embed(reviews, set_name="parts", source=ordered, parts=2, engine="onnx")
    assert requested["parts"] == 2 and requested["rows"] == 63
    assert requested["job_ids"][0] == requested["group_id"]
    ran = _sidecar(reviews)
    assert [j["state"] for j in ran["jobs"]] == ["done"] * 2
    host.embed(reviews, set_name="plain", source=ordered, batch_rows=31)
    _assert_same_rows(reviews, "parts", "plain")
    host.embed(reviews, set_name="unaligned", source=SOURCE)
    _assert_same_rows(reviews, "parts", "unaligned")
    vectors, rejects = _set_rows(reviews, "parts")
    assert len(vectors) == 60 and set(rejects) == {"empty", "twice"}
    listed = jobs(reviews, kind="embed")["jobs"]
    assert {j["state"] for j in listed} == {"done"}
    results = [json.loads(j) for j in JobQueue(reviews).listing()["result_json"]]
    assert sum(r["rows_read"] for r in results) == 63  # each row in exactly one part
    assert reviews.require_set("parts").source_query == ordered
    # Asked again, nothing changed: every part finds its rows' hashes unchanged.
    request_embed(reviews, set_name="parts", source=ordered, parts=2, engine="onnx")
    again = JobQueue(reviews).listing(state="queued")
    assert len(again) == 2
    _sidecar(reviews)
    results = [json.loads(j) for j in JobQueue(reviews).listing().head(2)["result_json"]]
    assert sum(r["embedded"] for r in results) == 0
    assert sum(r["unchanged"] for r in results) == 60


def _cli(url: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "sqlheads.cli", "--url", url, "--json", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ | {"HF_HUB_OFFLINE": "1"},
    )


def test_two_sidecar_processes_claim_disjoint_jobs(store: Store, rt_sample) -> None:
    rt_sample[["item_key", "text"]].to_sql("reviews", store.engine, index=False)
    request_embed(store, set_name="reviews", source=SOURCE, parts=6, engine="onnx", batch_rows=20)
    url = store.engine.url.render_as_string(hide_password=False)
    processes = [_cli(url, "sidecar", "--once", "--device", "cpu") for _ in range(2)]
    outputs = []
    for process in processes:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err
        outputs.append(json.loads(out))
    ran = [[j["job_id"] for j in o["jobs"]] for o in outputs]
    assert not set(ran[0]) & set(ran[1])  # no job ran twice
    assert sorted(ran[0] + ran[1]) == sorted(JobQueue(store).listing()["job_id"].tolist())
    assert all(ran), f"each sidecar claimed at least one job: {ran}"
    listing = JobQueue(store).listing()
    assert set(listing["state"]) == {"done"} and set(listing["attempts"]) == {1}
    assert listing["claimed_by"].nunique() == 2
    assert store.set_counts(store.require_set("reviews").set_id)["set_rows"] == len(rt_sample)


def test_a_killed_sidecar_loses_nothing(store: Store, rt_sample) -> None:
    """SIGKILL mid-job: the claim goes stale, the next sidecar takes it over and finishes."""
    rt_sample[["item_key", "text"]].to_sql("reviews", store.engine, index=False)
    (job_id,) = request_embed(
        store, set_name="reviews", source=SOURCE, engine="onnx", batch_rows=10
    )["job_ids"]
    url = store.engine.url.render_as_string(hide_password=False)
    victim = _cli(url, "sidecar", "--once", "--device", "cpu")
    deadline = time.monotonic() + 300
    written = 0
    while time.monotonic() < deadline and written == 0:
        time.sleep(0.05)
        found = store.find_set("reviews")
        written = store.set_counts(found.set_id)["set_rows"] if found else 0
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    queue = JobQueue(store)
    killed = queue.get(job_id)
    assert killed.state == "running" and killed.claimed_by.endswith(f":{victim.pid}")
    left = store.set_counts(store.require_set("reviews").set_id)["set_rows"]
    assert 0 < left < len(rt_sample), "killed mid-job, with some batches written"
    assert _sidecar(store, stale_after_seconds=2)["jobs"] == []  # its beat is still fresh
    silent_for(store, seconds=3)  # the killed sidecar's claim goes stale
    ran = _sidecar(store, stale_after_seconds=2)
    assert [(j["job_id"], j["state"]) for j in ran["jobs"]] == [(job_id, "done")]
    finished = queue.get(job_id)
    assert (finished.state, finished.attempts) == ("done", 2)
    result = json.loads(queue.listing()["result_json"].iloc[0])
    assert result["unchanged"] >= left  # what the killed attempt wrote was kept
    host.embed(store, set_name="plain", source=SOURCE)
    _assert_same_rows(store, "reviews", "plain")


def test_cancel_of_a_running_job_stops_it(reviews: Store) -> None:
    (job_id,) = request_embed(reviews, set_name="reviews", source=SOURCE, engine="onnx")["job_ids"]
    sidecar = Sidecar(reviews, SidecarOptions(device="cpu", worker="test:1"))
    job = sidecar.queue.claim("test:1")
    assert cancel_job(reviews, job_id=job_id)["state"] == "cancel_requested"
    outcome = sidecar.run_job(job)
    assert outcome["state"] == "cancelled"
    assert sidecar.queue.get(job_id).state == "cancelled"
    assert reviews.find_set("reviews") is None  # stopped before its first batch
    with pytest.raises(JobStateError, match="cancelled") as refused:
        cancel_job(reviews, job_id=job_id)
    assert refused.value.number == 50050


def test_cancel_of_a_queued_job(reviews: Store) -> None:
    (job_id,) = request_embed(reviews, set_name="reviews", source=SOURCE)["job_ids"]
    assert cancel_job(reviews, job_id=job_id)["state"] == "cancelled"
    assert _sidecar(reviews)["jobs"] == []


def test_a_failing_job_records_its_error_and_fails_at_once(reviews: Store) -> None:
    """A numbered user error would only fail again (issue 16): no retries for it."""
    request_embed(reviews, set_name="reviews", source=SOURCE, engine="onnx")
    stored = json.dumps({"source": SOURCE, "engine": "gpu"})
    with reviews.engine.begin() as c:  # a parameter the job refuses on every attempt
        c.execute(update(s.job_queue).values(parameters_json=stored))
    ran = _sidecar(reviews)
    assert [j["state"] for j in ran["jobs"]] == ["failed"]
    row = JobQueue(reviews).listing().iloc[0]
    assert (row.state, row.attempts, row.error_number) == ("failed", 1, 50012)
    assert "engine='gpu' is not one of auto, onnx, torch" in row.error


def test_a_job_keeps_its_work_dir_until_nothing_can_resume_from_it(
    reviews: Store, tmp_path
) -> None:
    """A failed job leaves no files behind (a retried one, after a transient fault, keeps its
    directory: the same path, job-<id>, for every attempt)."""
    request_embed(reviews, set_name="reviews", source=SOURCE, engine="onnx")
    with reviews.engine.begin() as c:  # a parameter the job refuses on every attempt
        c.execute(update(s.job_queue).values(parameters_json='{"source": "", "engine": "gpu"}'))
    sidecar = Sidecar(reviews, SidecarOptions(device="cpu", worker="test:1", work_root=tmp_path))
    states = []
    while (job := sidecar.queue.claim("test:1")) is not None:
        states.append(sidecar.run_job(job)["state"])
        states.append((tmp_path / f"job-{job.job_id}").is_dir())
    assert states == ["failed", False]


def test_two_databases_job_folders_differ_though_their_job_ids_are_the_same(
    tmp_path, monkeypatch
) -> None:
    """Job ids start at 1 in every database, and sidecars of two databases on one host share
    the cache: job 1 of one must not find, overwrite or delete job 1 of the other's
    checkpoints (two test workers' teacher jobs did: 'No such file ... stages.partial')."""
    first, second = (Store.from_url(f"sqlite:///{tmp_path / name}") for name in ("a.db", "b.db"))
    options = SidecarOptions(device="cpu")
    folders = [Sidecar(store, options).work_dir(1) for store in (first, second)]
    assert folders[0] != folders[1] and folders[0].name == folders[1].name == "job-1"
    # Stable across restarts, and the same file however its URL spells the path.
    monkeypatch.chdir(tmp_path)
    again = Store.from_url("sqlite:///a.db")
    assert Sidecar(again, options).work_dir(1) == folders[0]


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here: nothing to refuse")
def test_a_gpu_asked_for_and_absent_is_refused(store: Store) -> None:
    with pytest.raises(DeviceUnavailableError) as refused:
        Sidecar(store, SidecarOptions(device="cuda"))
    assert refused.value.number == 50055
    url = store.engine.url.render_as_string(hide_password=False)
    result = runner.invoke(app, ["--url", url, "--json", "sidecar", "--once", "--device", "cuda"])
    assert result.exit_code == 2
    assert json.loads(result.stdout)["number"] == 50055


def test_cli_request_list_cancel(reviews: Store) -> None:
    url = reviews.engine.url.render_as_string(hide_password=False)

    def cli(*args: str, code: int = 0) -> dict:
        result = runner.invoke(app, ["--url", url, "--json", *args])
        assert result.exit_code == code, result.output
        return json.loads(result.stdout)

    requested = cli("request-embed", "--set", "reviews", "--source", SOURCE, "--parts", "2")
    assert requested["parts"] == 2 and requested["engine"] == "auto"
    listed = cli("jobs", "--state", "queued")["jobs"]
    assert [j["part"] for j in listed] == [2, 1]
    assert cli("cancel-job", "--job-id", str(listed[0]["job_id"]))["state"] == "cancelled"
    assert cli("cancel-job", "--job-id", str(listed[0]["job_id"]), code=2)["number"] == 50050
    assert cli("jobs", "--state", "nowhere", code=2)["number"] == 50053
    refused = cli("request-embed", "--set", "r", "--source", SOURCE, "--parts", "0", code=2)
    assert refused["number"] == 50012 and "parts=0 is out of range" in refused["error"]


def test_request_teacher_refuses_a_missing_set_or_text(reviews: Store) -> None:
    """Refused before anything is queued (the teacher job's own checks come after these)."""
    from sqlheads.errors import MissingTextError, NotFoundError
    from sqlheads.sidecar.requests import request_teacher

    labels = "SELECT item_key, 'x' AS label FROM reviews"
    with pytest.raises(NotFoundError) as missing:
        request_teacher(reviews, head="h", set_name="nowhere", labels=labels)
    assert missing.value.number == 50001
    reviews.add_set("textless", encoders.resolve_encoder(reviews, None).encoder_id, "window")
    with pytest.raises(MissingTextError) as textless:
        request_teacher(reviews, head="h", set_name="textless", labels=labels)
    assert textless.value.number == 50024
    assert JobQueue(reviews).listing().empty


def test_a_stopped_sidecar_gives_its_job_back_at_once(store: Store, rt_sample) -> None:
    """SIGTERM (docker stop) mid-job: the job is queued again now, not after the stale limit,
    and the sidecar exits cleanly saying so; the next sidecar finishes it."""
    rt_sample[["item_key", "text"]].to_sql("reviews", store.engine, index=False)
    (job_id,) = request_embed(
        store, set_name="reviews", source=SOURCE, engine="onnx", batch_rows=10
    )["job_ids"]
    url = store.engine.url.render_as_string(hide_password=False)
    stopped = _cli(url, "sidecar", "--once", "--device", "cpu")
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and JobQueue(store).get(job_id).state != "running":
        time.sleep(0.05)
    stopped.send_signal(signal.SIGTERM)
    out, err = stopped.communicate(timeout=120)
    assert stopped.returncode == 0, err
    summary = json.loads(out)
    assert summary["stopped"] == "signal 15"
    assert summary["jobs"] == [{"job_id": job_id, "kind": "embed", "part": 1, "state": "released"}]
    released = JobQueue(store).get(job_id)
    assert (released.state, released.claimed_by, released.attempts) == ("queued", None, 1)
    ran = _sidecar(store)  # no waiting for a stale limit
    assert [(j["job_id"], j["state"]) for j in ran["jobs"]] == [(job_id, "done")]


@pytest.mark.parametrize("terminal", [True, False])
def test_progress_is_a_bar_on_a_terminal_and_lines_elsewhere(reviews: Store, terminal) -> None:
    from io import StringIO

    from rich.console import Console

    request_embed(reviews, set_name="reviews", source=SOURCE, engine="onnx", batch_rows=20)
    output = StringIO()
    console = Console(file=output, force_terminal=terminal, width=100)
    Sidecar(reviews, SidecarOptions(device="cpu", once=True), console=console).run()
    shown = output.getvalue()
    assert "job 1 embed reviews: done" in shown
    assert ("━" in shown) is terminal  # Rich's bar
    assert ("job 1 embed reviews: embedding reviews" in shown) is not terminal
    row = JobQueue(reviews).listing().iloc[0]
    # the last report recorded: the 60 rows embedded, of the 60 that needed it (the empty text
    # and both copies of the twice-given key are rejected, and leave the total: issue 38)
    assert (row.progress_done, row.progress_total) == (60, 60)

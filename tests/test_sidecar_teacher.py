"""Issue 9's "done when", end to end on the CPU: `sqlheads request-teacher` then `sqlheads
sidecar --once` fine-tunes a tiny teacher (MiniLM, a few steps), stores its soft labels, scores
transfer rows for its students, and trains both students, which appear in model_summary;
`predict` fills latest_predictions. On a GPU the same job runs on cuda (none was lent to check).
"""

from __future__ import annotations

import json

import pandas as pd
from sqlalchemy import select
from typer.testing import CliRunner

from sqlheads import host
from sqlheads.cli import app
from sqlheads.engine.encoder import cache_dir
from sqlheads.store import schema as s
from sqlheads.store.jobs import JobQueue
from sqlheads.store.repository import Store
from sqlheads.store.soft_labels import find_teacher, read_soft_labels
from sqlheads.verbs.teach import held_out_keys

runner = CliRunner()


def test_request_teacher_then_sidecar_once(store: Store, rt_sample: pd.DataFrame) -> None:
    tiny = pd.concat(g.head(20) for _, g in rt_sample.groupby("label")).reset_index(drop=True)
    tiny.to_sql("reviews", store.engine, index=False)
    host.embed(store, set_name="reviews", source="SELECT item_key, text FROM reviews")
    url = store.engine.url.render_as_string(hide_password=False)

    def cli(*args: str) -> dict:
        result = runner.invoke(app, ["--url", url, "--json", *args])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    requested = cli(
        "request-teacher", "--head", "sent", "--set", "reviews",
        "--labels", "SELECT item_key, label FROM reviews",
        "--model", "all-MiniLM-L6-v2", "--student", "encoder", "--student", "word",
        "--max-steps", "3", "--max-length", "32", "--batch-size", "8", "--epochs", "1",
        "--deploy", "always", "--transfer-rows", "30",
    )  # fmt: skip
    # The stored parameters are complete: source from the set, defaults filled in.
    assert requested["parameters"]["source"] == "SELECT item_key, text FROM reviews"
    assert requested["parameters"]["students"] == ["encoder", "word"]
    ran = cli("sidecar", "--once", "--device", "cpu")
    assert [(j["job_id"], j["state"]) for j in ran["jobs"]] == [(requested["job_id"], "done")]
    job = JobQueue(store).get(requested["job_id"])
    assert (job.state, job.attempts) == ("done", 1)
    # Its checkpoints (three times the teacher's weights) went with the finished job.
    assert not (cache_dir() / "jobs" / f"job-{job.job_id}").exists()
    result = json.loads(JobQueue(store).listing()["result_json"].iloc[0])
    assert set(result["students"]) == {"encoder", "word"}
    # The teacher scored the transfer rows where it ran; both students read them from the cache.
    assert result["teacher"]["transfer_rows"] == 30
    for student in result["students"].values():
        assert student["teacher_rows_scored"]["transfer_rows_scored"] == 0
        assert student["teacher_rows_scored"]["transfer_rows_cached"] == 30
        assert student["rows_train"] == 32 + 30  # 80 % of the 40 rows, and the transfer rows
    with store.engine.connect() as c:
        origins = set(c.execute(select(s.transfer_rows.c.origin_key)).scalars())
    held_out = held_out_keys(tiny[["item_key", "label"]], 0.2, 0)
    assert origins and origins <= set(tiny["item_key"]) - held_out

    versions = host.models(store)
    kinds = set(zip(versions["head"], versions["kind"], strict=True))
    assert {("sent_teacher", "teacher"), ("sent", "encoder_student"), ("sent", "word_student")} <= (
        kinds
    )
    # Soft labels for every row of the set, under the teacher that names its teacher version.
    teacher = find_teacher(store, "sent_teacher")
    teacher_version = versions[versions["head"] == "sent_teacher"]["model_id"].iloc[0]
    assert teacher is not None and teacher.set_id == store.require_set("reviews").set_id
    assert len(read_soft_labels(store, teacher.teacher_id)) == len(tiny)
    with store.engine.connect() as c:
        stored_model = c.execute(
            select(s.teachers.c.model_id).where(s.teachers.c.teacher_id == teacher.teacher_id)
        ).scalar_one()
    assert stored_model == teacher_version
    predicted = cli("predict", "--head", "sent", "--set", "reviews")
    assert predicted["rows"] == len(tiny)
    latest = store.read_view("latest_predictions", head="sent")
    assert len(latest) == len(tiny)

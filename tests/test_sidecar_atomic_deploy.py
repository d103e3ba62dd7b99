"""Issue 19, point 2: a teacher job's version and its deployment are one transaction. When the
deployment cannot be written (on SQL Server the sidecar once lacked DELETE on predictions,
error 229), the job fails and leaves no undeployed version behind for its retries to pile up.
SQLite refuses the deployment here with a real trigger, as a server refuses a missing right."""

from __future__ import annotations

import json

import pandas as pd
from sqlalchemy import func, select, text
from typer.testing import CliRunner

from sqlheads import host
from sqlheads.cli import app
from sqlheads.store import schema as s
from sqlheads.store.jobs import JobQueue
from sqlheads.store.repository import Store

runner = CliRunner()


def _versions(store: Store, head: str) -> int:
    with store.engine.connect() as c:
        return c.execute(
            select(func.count()).select_from(s.models).where(s.models.c.head == head)
        ).scalar_one()


def test_a_refused_deployment_leaves_no_teacher_version(
    store: Store, rt_sample: pd.DataFrame
) -> None:
    tiny = pd.concat(g.head(12) for _, g in rt_sample.groupby("label")).reset_index(drop=True)
    tiny.to_sql("reviews", store.engine, index=False)
    host.embed(store, set_name="reviews", source="SELECT item_key, text FROM reviews")
    url = store.engine.url.render_as_string(hide_password=False)
    requested = runner.invoke(
        app,
        [
            "--url", url, "--json", "request-teacher", "--head", "sent", "--set", "reviews",
            "--labels", "SELECT item_key, label FROM reviews", "--model", "all-MiniLM-L6-v2",
            "--no-students", "--max-steps", "2", "--max-length", "16", "--batch-size", "8",
            "--epochs", "1", "--deploy", "always",
        ],
    )  # fmt: skip
    assert requested.exit_code == 0, requested.output
    job_id = json.loads(requested.stdout)["job_id"]
    with store.engine.begin() as c:
        c.execute(
            text(
                "CREATE TRIGGER refuse_deployments BEFORE INSERT ON deployments "
                "BEGIN SELECT RAISE(ABORT, 'deployments refused by this test'); END"
            )
        )
    ran = runner.invoke(app, ["--url", url, "--json", "sidecar", "--once", "--device", "cpu"])
    assert ran.exit_code == 1, ran.output  # a job it ran failed (issue 16)
    job = JobQueue(store).listing().set_index("job_id").loc[job_id]
    assert job["state"] == "failed" and "deployments refused" in job["error"], job.to_dict()
    assert _versions(store, "sent_teacher") == 0  # the version went with its deployment

"""Every JSON the command line prints keeps integer columns integers (issue 16, part 2): a
frame of rows makes an INTEGER column with a NULL float, and ``--json jobs`` printed
``"error_number": 50004.0``."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from sqlheads import host
from sqlheads.cli import app
from sqlheads.errors import SingleClassError
from sqlheads.store.jobs import JobQueue
from sqlheads.store.repository import Store

runner = CliRunner()
PARAMS = {"source": "SELECT item_key, text FROM reviews", "engine": "onnx"}


def test_json_jobs_prints_integer_columns_as_integers(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'heads.db'}"
    store = Store.from_url(url)
    host.init(store)
    queue = JobQueue(store, max_attempts=1)
    (failed,) = queue.enqueue("teacher", "reviews", PARAMS)
    queue.claim("w1")
    queue.fail(failed.job_id, "w1", SingleClassError("the labels hold one class: 'positive'"))
    queue.enqueue("embed", "reviews", PARAMS)  # queued: no error number, no progress yet
    result = runner.invoke(app, ["--url", url, "--json", "jobs"])
    assert result.exit_code == 0, result.output
    listed = {job["job_id"]: job for job in json.loads(result.stdout)["jobs"]}
    assert listed[failed.job_id]["error_number"] == 50004
    for job in listed.values():
        for column in ("job_id", "attempts", "max_attempts", "part", "parts", "error_number"):
            assert job[column] is None or type(job[column]) is int, (column, job[column])

"""heads.add_version (its newest text under sql/) and its Python caller agree: each models
column the sidecar writes is a parameter of the procedure, and the procedure inserts the
deployment and re-scores in the transaction that inserts the version (issue 19, point 2), with
the keys the version was labelled on (revision 0007)."""

from __future__ import annotations

import re

import sqlheads_sql

from sqlheads.store.server_versions import COLUMNS

PROCEDURE = next(p for p in sqlheads_sql.object_files() if p.name == "add_version.sql")


def test_the_python_caller_passes_every_parameter_the_procedure_declares() -> None:
    text = PROCEDURE.read_text()
    header = text[text.index("CREATE OR ALTER PROCEDURE") : text.index("\nAS\n")]
    declared = re.findall(r"^\s+@(\w+) ", header, flags=re.MULTILINE)
    assert declared == [*COLUMNS, "deploy_reason", "labelled_keys_json", "model_id"]


def test_the_version_and_its_deployment_are_one_transaction() -> None:
    body = PROCEDURE.read_text().split("\nAS\n", 1)[1]
    begin, commit = body.index("BEGIN TRANSACTION"), body.index("COMMIT TRANSACTION")
    steps = (
        "INSERT INTO heads.models",
        "INSERT INTO heads.labelled_keys",
        "INSERT INTO heads.deployments",
        "replace_predictions",
    )
    for step in steps:
        assert begin < body.index(step) < commit, step
    assert "SET XACT_ABORT ON" in body  # any error rolls the version back with the deployment

"""heads.add_version and heads.store_soft_labels (sql/0007/internal/) and their Python caller
(sqlheads.store.server_versions) agree, and bind what SQL Server can take: each models column
the sidecar writes is a parameter of the procedure, and a ``varbinary(max)`` value that is None
is written as NULL, never bound (a NULL bound untyped arrives as varchar, which SQL Server will
not convert implicitly: Msg 257, mssql-python #458). That the version, the keys it was
labelled on, its deployment and the re-scoring are one transaction is read as statements in
tests/test_sqlserver_statements.py; the contract of every EXEC the Python sends is checked
there too."""

from __future__ import annotations

import re

import sqlheads_sql
from sqlalchemy import LargeBinary
from sqlalchemy.dialects import mssql
from sqlserver_tsql import exec_calls, procedure_parameters, tokens

from sqlheads.store import server_versions
from sqlheads.store.server_versions import COLUMNS

PROCEDURES = {sqlheads_sql.object_name(p)[1]: p for p in sqlheads_sql.object_files()}


def test_every_models_column_is_a_parameter_of_the_procedure() -> None:
    declared = [p.name for p in procedure_parameters(PROCEDURES["heads.add_version"])]
    assert set(COLUMNS) <= set(declared)
    assert {"job_id", "worker", "deploy", "model_id", "deployed"} <= set(declared)
    assert "labelled_keys_json" in declared  # the keys the version was labelled on (0007)
    assert "deploy_reason" not in declared  # the procedure decides the deployment itself


def test_a_null_varbinary_value_is_never_bound() -> None:
    """A teacher version's onnx is None (its blob is the ONNX graph already): bound untyped it
    would arrive as varchar, which SQL Server refuses for a varbinary(max) parameter (Msg 257,
    mssql-python #458); it is written as the literal NULL instead, and non-NULL bytes are
    bound as LargeBinary."""
    parameters = {p.name: p.type for p in procedure_parameters(PROCEDURES["heads.add_version"])}
    binary = sorted(name for name, kind in parameters.items() if kind == "varbinary(max)")
    assert sorted(server_versions.BINARY) == binary == ["blob", "onnx"]
    batch = server_versions.add_version_text(frozenset({"onnx"}))
    (call,) = exec_calls(tokens(re.sub(r":(\w+)", r"@\1", batch.text)))
    passed = {a.parameter: " ".join(t.text for t in a.value) for a in call.arguments}
    assert passed["onnx"] == "NULL" and passed["blob"] == "@blob"
    assert ":onnx" not in batch.text
    binds = batch.compile(dialect=mssql.dialect()).binds
    assert isinstance(binds["blob"].type, LargeBinary) and "onnx" not in binds

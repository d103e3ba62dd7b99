"""heads.add_version and heads.store_soft_labels (sql/0007/internal/) and their Python caller
(sqlheads.store.server_versions) agree, and bind what SQL Server can take: each models column
the sidecar writes is a parameter of the procedure, and every ``varbinary(max)`` value reaches
it through a variable of that type (a NULL bound untyped arrives as varchar, which SQL Server
will not convert implicitly: Msg 257, mssql-python #458). That the version, its deployment and
the re-scoring are one transaction is read as statements in tests/test_sqlserver_statements.py;
the contract of every EXEC the Python sends is checked there too."""

from __future__ import annotations

import re

import sqlheads_sql
from sqlserver_tsql import exec_calls, procedure_parameters, tokens

from sqlheads.store import server_versions
from sqlheads.store.server_versions import COLUMNS

PROCEDURES = {sqlheads_sql.object_name(p)[1]: p for p in sqlheads_sql.object_files()}


def test_every_models_column_is_a_parameter_of_the_procedure() -> None:
    declared = [p.name for p in procedure_parameters(PROCEDURES["heads.add_version"])]
    assert set(COLUMNS) <= set(declared)
    assert {"job_id", "worker", "deploy", "model_id", "deployed"} <= set(declared)
    assert "deploy_reason" not in declared  # the procedure decides the deployment itself


def test_varbinary_values_are_bound_through_typed_variables() -> None:
    parameters = {p.name: p.type for p in procedure_parameters(PROCEDURES["heads.add_version"])}
    binary = sorted(name for name, kind in parameters.items() if kind == "varbinary(max)")
    assert binary == ["blob", "onnx"]
    text = server_versions.ADD_VERSION.text
    (call,) = [c for c in exec_calls(tokens(re.sub(r":(\w+)", r"@\1", text)))]
    passed = {a.parameter: " ".join(t.text for t in a.value) for a in call.arguments}
    for name in binary:
        assert passed[name] == f"@{name}", name  # a variable, not the bound value itself
        assert f"DECLARE @{name} varbinary(max) = CONVERT(varbinary(max), :{name});" in text
    soft = server_versions.INSERT_SOFT_LABEL.text
    assert "CONVERT(varbinary(max), :logits)" in soft

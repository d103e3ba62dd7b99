"""Issue 19, the second SQL Server audit, checked without a server: lists are aggregated, never
concatenated row by row (point 4), and the smaller points (6) where the T-SQL and Python must
agree. The role revoker and the transactions of heads.write_version are read as statements in
tests/test_sqlserver_statements.py. The live halves are in tests/test_sqlserver_live_security.py."""

from __future__ import annotations

import json
import re
import sys

import numpy as np
import pandas as pd
import pytest
import sqlheads_sql
from sqlserver_tsql import strip_comments_and_strings

from sqlheads import procedures, settings

CURRENT = sqlheads_sql.object_files()
BY_NAME = {sqlheads_sql.object_name(p)[1]: p for p in CURRENT}
MIGRATION_BATCHES = {"REVOKE_ROLE": sqlheads_sql.REVOKE_ROLE, "DROP_ROLE": sqlheads_sql.DROP_ROLE}

# ``SELECT @v = @v + ...`` / ``SELECT @v = CONCAT(@v, ...)`` / ``JSON_MODIFY(@v, ...)`` over
# rows: Microsoft documents that such aggregate concatenation can return partial results.
SELF_CONCATENATION = re.compile(
    r"SELECT\s+@(\w+)\s*=\s*(?:@\1\s*\+|CONCAT\s*\(\s*@\1\b|JSON_MODIFY\s*\(\s*@\1\b)",
    re.IGNORECASE,
)


@pytest.mark.parametrize(
    "name, sql",
    [(p.name, p.read_text()) for p in CURRENT] + sorted(MIGRATION_BATCHES.items()),
    ids=lambda value: value if len(value) < 60 else "",
)
def test_lists_are_built_with_string_agg(name: str, sql: str) -> None:
    code = strip_comments_and_strings(sql)
    found = [
        m.group(0)
        for m in SELF_CONCATENATION.finditer(code)
        # a running total of one aggregate row (@rows = @rows + COUNT_BIG(*)) is no list
        if not re.match(r"\s*(COUNT|SUM|COALESCE\(\s*SUM)", code[m.end() :])
    ]
    assert not found, f"{name}: build the list with STRING_AGG, not {found}"


def test_the_database_permissions_it_revokes_are_the_ones_role_files_grant() -> None:
    """Class 0 (database) permissions are revoked by name: those some role file grants."""
    granted = {
        m.group(1).strip().upper()
        for path in sqlheads_sql.all_files()
        if path.parent.name == "roles"
        for m in re.finditer(r"^GRANT ([A-Z ]+?) TO ", path.read_text(), re.M)
    }
    revoked = set(re.findall(r"permission_name IN \(([^)]*)\)", sqlheads_sql.REVOKE_ROLE))
    names = {n.strip().strip("N'") for group in revoked for n in group.split(",")}
    assert granted and granted <= names, (granted, names)


def test_request_embed_counts_keys_and_rows_in_bigint() -> None:
    """``@cut * @keys`` in int overflows at about 34M keys (46,341 parts x 46,341 keys...),
    and the counts themselves past 2^31 rows (the third audit, point 5)."""
    code = strip_comments_and_strings(BY_NAME["heads.request_embed"].read_text())
    assert "(@cut * @keys)" not in code
    assert re.search(r"CAST\(@cut AS bigint\) \* @keys", code)
    declared = dict(re.findall(r"DECLARE (@\w+) (\w+)", code))
    assert declared["@keys"] == declared["@rows"] == "bigint"
    assert "@@ROWCOUNT" not in code and "position bigint" in code


def python_whitespace() -> set[int]:
    return {c for c in range(sys.maxunicode + 1) if chr(c).isspace()}


def test_predict_and_python_agree_on_whitespace_only_text() -> None:
    """predict.sql skips a batch whose texts are all blank exactly when Python's ``strip()``
    finds nothing left: the characters it trims are Python's whitespace, no more, no less."""
    text = BY_NAME["heads.predict"].read_text()
    blank = re.search(r"DECLARE @blank nvarchar\(\d+\) = CONCAT\(([^;]*)\);", text)
    assert blank, "predict.sql: declare @blank, Python's whitespace, and TRIM(@blank FROM text)"
    codes = {int(n) for n in re.findall(r"NCHAR\((\d+)\)", blank.group(1))}
    assert codes == python_whitespace()
    # in BIN2: under the database collation some characters compare equal to N''
    assert "TRIM(@blank FROM b.text COLLATE Latin1_General_100_BIN2) <> N''" in text
    assert "TRIM(@blank FROM b.text) <> N''" not in text and "LEN(b.text) > 0" not in text


def test_soft_label_classes_with_dots_come_back_whole() -> None:
    """``FOR JSON PATH`` nests a column named ``a.b``; Python joins the path back."""
    rows = [
        {"item_key": "1", "very": {"good": 2.0}, "bad": -1.0},
        {"item_key": "2", "very": {"good": -1.5}, "bad": 1.0},
    ]
    frame = pd.DataFrame({"item_key": ["1", "2"], "row_json": [json.dumps(r) for r in rows]})
    out = procedures.soft_labels(frame)
    assert json.loads(out.iloc[0]["classes_json"]) == ["very.good", "bad"]
    first = np.frombuffer(out.iloc[0]["logits"], dtype=np.float32)
    assert first.tolist() == [2.0, -1.0]


def test_distill_reads_the_deploy_policy_in_any_case(rt_sample) -> None:
    """As train does (``settings.choice``): ``ALWAYS`` is ``always``."""
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(len(rt_sample), 8)).astype(np.float32)
    vectors[:, 0] += np.where(rt_sample["label"] == "positive", 2.0, -2.0)
    logits = np.stack([-vectors[:, 0], vectors[:, 0]], axis=1).astype(np.float32)
    frame = pd.DataFrame(
        {
            "item_key": rt_sample["item_key"],
            "label": rt_sample["label"],
            "logits": [row.tobytes() for row in logits],
            "vector": [row.tobytes() for row in vectors],
        }
    )
    out = procedures.distill(
        frame,
        student="head",
        teacher_classes_json='["negative", "positive"]',
        dim=8,
        deploy=" ALWAYS",
    )
    assert bool(out.iloc[0]["deploy"]) and out.iloc[0]["deploy_reason"] == (
        settings.deploy_reason("always")
    )


def test_the_extensibility_package_is_pinned_to_the_servers_version() -> None:
    """Feature packages depend on the exact mssql-server version (mssql-docker#232, #270):
    the image installs mssql-server-extensibility with apt, as Microsoft's SQL Server 2022
    Linux page does, at the base image's own version, with service starts refused while it
    installs (policy-rc.d), then sets it up as Microsoft's Linux install does
    (checkinstallextensibility.sh, mssql_satellite, /var/opt/mssql-extensibility)."""
    from test_sqlserver_setup import DOCKERFILE, instructions

    run = " ".join(i for i in instructions(DOCKERFILE) if i.startswith("RUN"))
    assert "dpkg-query -W -f='${Version}' mssql-server" in run
    install = (
        'apt-get install -y --no-install-recommends mssql-server-extensibility="${MSSQL_VERSION}"'
    )
    assert install in run and "dpkg --unpack" not in run and "postinst" not in run
    assert run.index("exit 101") < run.index(install) < run.index("rm -f /usr/sbin/policy-rc.d")
    assert "/opt/mssql/bin/checkinstallextensibility.sh" in run
    assert "mssql_satellite" in run and "/var/opt/mssql-extensibility" in run


def test_distill_stores_soft_labels_before_the_version_transaction() -> None:
    """The soft-label rewrite (every row of the set) is its own transaction, committed before
    heads.write_version's short one, as the embedded host does."""
    text = strip_comments_and_strings(BY_NAME["heads.distill"].read_text())
    write = text.index("EXEC heads.write_version")
    rewrite = text.index("INSERT INTO heads.soft_labels")
    between = text[rewrite:write]
    assert "COMMIT TRANSACTION" in between
    assert "BEGIN TRANSACTION" not in text[write : text.index("BEGIN CATCH")]


def test_python_writers_lock_the_names_the_tsql_verbs_lock() -> None:
    """store.applocks (Python on SQL Server) and heads.lock_resource build the same name."""
    from sqlheads.store.applocks import lock_resource

    text = BY_NAME["heads.lock_resource"].read_text()
    assert "RETURN CONCAT(N'heads.', @kind, N':', LOWER(@name));" in text
    assert lock_resource("set", "Reviews") == "heads.set:reviews"
    assert lock_resource("head.use", "Sent") == "heads.head.use:sent"

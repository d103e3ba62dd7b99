"""A new version and its deployment on SQL Server, through ``heads.add_version``
(sql/0007/internal/add_version.sql), and a teacher's soft labels through
``heads.store_soft_labels``.

Neither the sidecar's login nor an analyst's holds INSERT on ``models``, ``deployments``,
``teachers`` or ``soft_labels``: the procedures write with their owner's rights, scoped to the
job the sidecar holds (``store.claim``; heads_admin's own calls pass none). ``heads.add_version``
takes the head's lock, asks Python for the deploy decision against the version deployed now
(the policy is the job's, or the caller's), numbers, inserts, deploys and re-scores in one
transaction. The column names are the schema's, never a caller's; every value is a bound
parameter, but a ``varbinary(max)`` one that is None, which is written as NULL: a NULL sent
untyped arrives as varchar, which SQL Server will not convert implicitly (Msg 257;
mssql-python #458).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import LargeBinary, TextClause, bindparam, text

from sqlheads.store import schema as s
from sqlheads.store.repository import Model, Store

# The models columns a caller passes (the procedure numbers the version; the rest it makes).
COLUMNS = tuple(c.name for c in s.models.c if c.name not in ("model_id", "version", "created_at"))
BINARY = tuple(c for c in COLUMNS if isinstance(s.models.c[c].type, LargeBinary))


def add_version_text(nulls: frozenset[str] = frozenset()) -> TextClause:
    """The batch that calls heads.add_version. A ``varbinary(max)`` value that is None is
    written as the literal NULL, never bound: a NULL bound untyped arrives as varchar, which
    SQL Server will not convert to varbinary implicitly (Msg 257; mssql-python #458)."""
    passed = ", ".join(f"@{c} = NULL" if c in nulls else f"@{c} = :{c}" for c in COLUMNS)
    return text(
        "SET NOCOUNT ON; DECLARE @model_id int, @deployed bit, @previous_macro_f1 float; "
        "EXEC heads.add_version @job_id = :job_id, @worker = :worker, @deploy = :deploy, "
        + passed
        + ", @labelled_keys_json = :labelled_keys_json"
        ", @model_id = @model_id OUTPUT, @deployed = @deployed OUTPUT, "
        "@previous_macro_f1 = @previous_macro_f1 OUTPUT; "
        "SELECT @model_id AS model_id, @deployed AS deployed, "
        "@previous_macro_f1 AS previous_macro_f1"
    ).bindparams(*(bindparam(c, type_=LargeBinary) for c in BINARY if c not in nulls))


ADD_VERSION = add_version_text()  # every value bound (a teacher's onnx is None: see above)

# #soft_labels is the procedure's input (sql/0007/internal/store_soft_labels.sql reads it).
SOFT_LABELS_STAGE = "#soft_labels"
SOFT_LABELS_COLUMNS = {"item_key": f"nvarchar({s.KEY_LENGTH})", "logits": "varbinary(max)"}
_STAGE_SOFT_LABELS = text(
    f"CREATE TABLE {SOFT_LABELS_STAGE} ("
    + ", ".join(f"{name} {kind} NOT NULL" for name, kind in SOFT_LABELS_COLUMNS.items())
    + ")"
)
INSERT_SOFT_LABEL = text(  # logits are never NULL (NOT NULL): always bound as bytes
    f"INSERT INTO {SOFT_LABELS_STAGE} (item_key, logits) VALUES (:item_key, :logits)"
).bindparams(bindparam("logits", type_=LargeBinary))
STORE_SOFT_LABELS = text(
    "SET NOCOUNT ON; DECLARE @teacher_id int; "
    "EXEC heads.store_soft_labels @job_id = :job_id, @worker = :worker, @teacher = :teacher, "
    "@set_id = :set_id, @classes_json = :classes_json, @model_id = :model_id, "
    "@teacher_id = @teacher_id OUTPUT; "
    f"DROP TABLE {SOFT_LABELS_STAGE}; "
    "SELECT @teacher_id AS teacher_id"
)


def _claim(store: Store) -> dict[str, Any]:
    claim = store.claim
    return (
        {"job_id": None, "worker": None}
        if claim is None
        else {
            "job_id": claim.job_id,
            "worker": claim.worker,
        }
    )


def add_version(
    store: Store,
    values: dict[str, Any],
    deploy: str | None,
    labelled_keys: Sequence[str] = (),
) -> tuple[Model, bool, float | None]:
    """Store a version and deploy it if ``heads.add_version`` decides to (policy ``deploy``,
    or the held job's own), with the keys it was trained and scored on (a JSON array:
    revision 0007): the version, whether it was deployed, and the macro-F1 of the version
    deployed when it decided (None: none)."""
    unknown = sorted(set(values) - set(COLUMNS))
    if unknown:
        raise ValueError(f"heads.add_version has no parameter(s) {', '.join(unknown)}")
    # NumPy scalars (a trained row's figures) as Python numbers: text() binds them as given.
    plain = {k: v.item() if hasattr(v, "item") else v for k, v in values.items()}
    arguments = dict.fromkeys(COLUMNS) | plain | _claim(store) | {"deploy": deploy}
    arguments["labelled_keys_json"] = json.dumps(list(dict.fromkeys(map(str, labelled_keys))))
    nulls = frozenset(c for c in BINARY if arguments[c] is None)
    for column in nulls:
        del arguments[column]
    with store.engine.begin() as connection:
        row = connection.execute(add_version_text(nulls), arguments).one()
    previous = None if row.previous_macro_f1 is None else float(row.previous_macro_f1)
    return store.model_by_id(int(row.model_id)), bool(row.deployed), previous


def store_soft_labels(
    store: Store,
    name: str,
    set_id: int,
    classes_json: str,
    rows: list[dict[str, Any]],
    model_id: int | None,
) -> int:
    """Create teacher ``name`` or replace its soft labels (``rows``: item_key, logits), in
    ``heads.store_soft_labels``' one transaction; the teacher_id."""
    with store.engine.begin() as connection:
        connection.execute(_STAGE_SOFT_LABELS)
        if rows:
            connection.execute(INSERT_SOFT_LABEL, rows)
        return int(
            connection.execute(
                STORE_SOFT_LABELS,
                _claim(store)
                | {
                    "teacher": name,
                    "set_id": set_id,
                    "classes_json": classes_json,
                    "model_id": model_id,
                },
            ).scalar_one()
        )

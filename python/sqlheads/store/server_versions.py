"""A new version and its deployment on SQL Server, through ``heads.add_version``
(sql/0007/internal/add_version.sql), with no write rights of the sidecar's own.

The sidecar's login holds EXECUTE on that procedure and no INSERT on ``models`` or
``deployments``, nor DELETE on ``predictions``: the procedure numbers, inserts, deploys and
re-scores in one transaction with its owner's rights. The column names are the schema's, never
a caller's; every value is a bound parameter.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import text

from sqlheads.store import schema as s
from sqlheads.store.repository import Model, Store

# The models columns a caller passes (the procedure numbers the version; the rest it makes).
COLUMNS = tuple(c.name for c in s.models.c if c.name not in ("model_id", "version", "created_at"))
_ADD_VERSION = text(
    "SET NOCOUNT ON; DECLARE @model_id int; EXEC heads.add_version "
    + ", ".join(f"@{name} = :{name}" for name in COLUMNS)
    + ", @deploy_reason = :deploy_reason, @labelled_keys_json = :labelled_keys_json"
    ", @model_id = @model_id OUTPUT; "
    "SELECT @model_id AS model_id"
)


def add_version(
    store: Store,
    values: dict[str, Any],
    deploy_reason: str | None,
    labelled_keys: Sequence[str] = (),
) -> Model:
    """Store a version and, given ``deploy_reason``, deploy it, in heads.add_version's one
    transaction, with the keys it was trained and scored on (a JSON array: revision 0007)."""
    unknown = sorted(set(values) - set(COLUMNS))
    if unknown:
        raise ValueError(f"heads.add_version has no parameter(s) {', '.join(unknown)}")
    # NumPy scalars (a trained row's figures) as Python numbers: text() binds them as given.
    plain = {k: v.item() if hasattr(v, "item") else v for k, v in values.items()}
    arguments = dict.fromkeys(COLUMNS) | plain | {"deploy_reason": deploy_reason}
    arguments["labelled_keys_json"] = json.dumps(list(dict.fromkeys(map(str, labelled_keys))))
    with store.engine.begin() as connection:
        model_id = connection.execute(_ADD_VERSION, arguments).scalar_one()
    return store.model_by_id(int(model_id))

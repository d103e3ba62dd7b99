"""Writes into a set, and who may make them (the fourth SQL Server audit, findings 3 to 5).

A set belongs to the user who made it, and only its owner (or heads_admin on SQL Server)
writes its vectors or its source query; the author of a stored source query is always the
user who stored it, so no role can make a query run as somebody else. On SQL Server those
rules are the procedures': ``heads.store_set`` (the command line's set and source query),
``heads.job_set`` and ``heads.write_embeddings`` (a sidecar's embed job, scoped to the job it
holds and owned by its requester). On SQLite, whose users are the OS users (by name, and no
one is heads_admin), the same rules run here, each under :func:`boundary.procedure` of the
procedure it stands for. A set made before revision 0008 whose owner is not known is taken by
the next user who writes into it, on both.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd
from sqlalchemy import Connection, LargeBinary, bindparam, delete, insert, select, text, update

from sqlheads import settings
from sqlheads.errors import NotFoundError, SetOwnerError
from sqlheads.store import boundary, claims, staging
from sqlheads.store import schema as s
from sqlheads.store.claims import JobClaim
from sqlheads.store.keys import key_chunks

es = s.embedding_sets.c


@dataclass(frozen=True)
class Writer:
    """Who writes into a set: a sidecar holding ``claim`` (for the job's requester), or the
    caller; ``user`` is the OS user on SQLite (None on SQL Server, whose procedures know)."""

    sqlite: bool
    claim: JobClaim | None
    user: str | None


# heads.store_set (sql/0008/internal/store_set.sql): the command line's set, owned by the caller.
STORE_SET = text(
    "SET NOCOUNT ON; DECLARE @set_id int; "
    "EXEC heads.store_set @set = :set, @encoder_id = :encoder_id, @long_text = :long_text, "
    "@source = :source, @set_id = @set_id OUTPUT; "
    "SELECT @set_id AS set_id"
)
# #embed_rows is heads.write_embeddings' input (sql/0008/internal/write_embeddings.sql).
EMBED_ROWS_STAGE = "#embed_rows"
EMBED_ROWS_COLUMNS = {
    "item_key": f"nvarchar({s.KEY_LENGTH}) COLLATE DATABASE_DEFAULT NOT NULL",
    "text_sha256": "char(64) COLLATE DATABASE_DEFAULT NULL",
    "vector": "varbinary(max) NULL",
    "windows": "int NULL",
    "reject_reason": "nvarchar(400) COLLATE DATABASE_DEFAULT NULL",
}
# Vectors and rejects apart: a vector is never bound as None (a NULL sent untyped arrives as
# varchar, which SQL Server will not convert to varbinary: Msg 257; mssql-python #458).
INSERT_EMBEDDED = staging.insert(
    EMBED_ROWS_STAGE, ["item_key", "text_sha256", "vector", "windows"]
).bindparams(bindparam("vector", type_=LargeBinary))
INSERT_REJECTED = staging.insert(EMBED_ROWS_STAGE, ["item_key", "reject_reason"])
WRITE_EMBEDDINGS = text(
    "SET NOCOUNT ON; "
    "EXEC heads.write_embeddings @job_id = :job_id, @worker = :worker, @set_id = :set_id; "
    f"DROP TABLE {EMBED_ROWS_STAGE}"
)


def make_set(c: Connection, writer: Writer, name: str, encoder_id: int, long_text: str) -> None:
    """The set ``name`` made now, or found if it exists and may be written by ``writer``: a
    sidecar's is its embed job's (the encoder and mode its request recorded), the caller's
    is owned by the caller."""
    if writer.claim is not None:
        _job_set(c, writer, record_source=False)
    elif not writer.sqlite:
        c.execute(
            STORE_SET,
            {"set": name, "encoder_id": encoder_id, "long_text": long_text, "source": None},
        )
    else:
        with boundary.procedure("heads.store_set"):
            found = c.execute(select(es.set_id).where(es.name == name)).scalar_one_or_none()
            if found is None:
                c.execute(
                    insert(s.embedding_sets).values(
                        name=name,
                        encoder_id=encoder_id,
                        long_text=long_text,
                        owner_user=writer.user,
                    )
                )
            else:
                require_owner(c, found, writer.user)


def record_source(c: Connection, writer: Writer, set_id: int, name: str, sql: str) -> None:
    """Record ``sql`` as set ``name``'s source query with its author: the caller, or the
    requester of the embed job a sidecar holds (whose recorded source it is)."""
    if writer.claim is not None:
        _job_set(c, writer, record_source=True)
    elif not writer.sqlite:
        c.execute(STORE_SET, {"set": name, "encoder_id": None, "long_text": None, "source": sql})
    else:
        with boundary.procedure("heads.store_set"):
            require_owner(c, set_id, writer.user)
            c.execute(
                update(s.embedding_sets)
                .where(es.set_id == set_id)
                .values(source_query=sql, source_user=writer.user)
            )


def write_batch(c: Connection, writer: Writer, set_id: int, output: pd.DataFrame) -> None:
    """One embedded batch (``item_key``, ``text_sha256``, ``vector``, ``windows``,
    ``reject_reason``): each key's old vector and reject replaced, in ``c``'s transaction. A
    sidecar's goes through ``heads.write_embeddings`` on SQL Server, scoped to its job."""
    if writer.claim is not None and not writer.sqlite:
        embedded, rejected = _split(output)
        c.execute(staging.create(EMBED_ROWS_STAGE, EMBED_ROWS_COLUMNS))
        if len(embedded):
            c.execute(
                INSERT_EMBEDDED,
                [
                    {
                        "item_key": r.item_key,
                        "text_sha256": r.text_sha256,
                        "vector": bytes(r.vector),
                        "windows": int(r.windows),
                    }
                    for r in embedded.itertuples(index=False)
                ],
            )
        if len(rejected):
            c.execute(
                INSERT_REJECTED,
                [
                    {"item_key": r.item_key, "reject_reason": r.reject_reason}
                    for r in rejected.itertuples(index=False)
                ],
            )
        c.execute(
            WRITE_EMBEDDINGS,
            {"job_id": writer.claim.job_id, "worker": writer.claim.worker, "set_id": set_id},
        )
        return
    if writer.claim is None:
        if writer.sqlite:  # SQL Server: heads_admin's own Python, which may write any set
            require_owner(c, set_id, writer.user)
        _replace_rows(c, set_id, output)
        return
    with boundary.procedure("heads.write_embeddings"):
        job = claims.held(c, writer.claim, "embed")
        keys = output["item_key"].tolist()
        captured = _captured(c, job.job_id, keys)
        if not claims.is_job_set(c, job, set_id) or set(keys) - captured:
            raise claims.outside(
                job, f"the vectors of the rows its request captured, into set {job.set_name!r}"
            )
        require_owner(c, set_id, job.requested_user)
        _replace_rows(c, set_id, output)


def _split(output: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A batch's embedded rows and its rejects."""
    return output[output["reject_reason"].isna()], output[output["reject_reason"].notna()]


def _replace_rows(c: Connection, set_id: int, output: pd.DataFrame) -> None:
    keys = output["item_key"].tolist()
    embedded, rejected = _split(output)
    for chunk in key_chunks(keys):
        # A rejected row's old vector is stale too: its text is gone.
        for table in (s.embeddings, s.rejects):
            c.execute(delete(table).where(table.c.set_id == set_id, table.c.item_key.in_(chunk)))
    if len(embedded):
        c.execute(
            insert(s.embeddings),
            [
                {
                    "set_id": set_id,
                    "item_key": r.item_key,
                    "text_sha256": r.text_sha256,
                    "vector": r.vector,
                    "windows": int(r.windows),
                }
                for r in embedded.itertuples(index=False)
            ],
        )
    if len(rejected):
        c.execute(
            insert(s.rejects),
            [
                {"set_id": set_id, "item_key": r.item_key, "reason": r.reject_reason}
                for r in rejected.itertuples(index=False)
            ],
        )


def _captured(c: Connection, job_id: int, keys: Iterable[str]) -> set[str]:
    """Those of ``keys`` the job's request captured."""
    i = s.job_inputs.c
    found: set[str] = set()
    for chunk in key_chunks(list(dict.fromkeys(keys))):
        found.update(
            c.execute(select(i.item_key).where(i.job_id == job_id, i.item_key.in_(chunk))).scalars()
        )
    return found


def _job_set(c: Connection, writer: Writer, *, record_source: bool) -> None:
    """``heads.job_set``: on SQL Server the procedure; on SQLite its equivalent."""
    assert writer.claim is not None
    if not writer.sqlite:
        claims.job_set(c, writer.claim, record_source=record_source)
        return
    with boundary.procedure("heads.job_set"):
        job = claims.held(c, writer.claim, "embed")
        parameters = job.parameters
        found = c.execute(select(es.set_id).where(es.name == job.set_name)).scalar_one_or_none()
        if found is None:
            encoder_id = c.execute(
                select(s.encoders.c.encoder_id).where(
                    s.encoders.c.name == parameters.get("encoder")
                )
            ).scalar_one_or_none()
            if encoder_id is None:
                raise NotFoundError(
                    f"job {job.job_id} names encoder {parameters.get('encoder')!r}, which is not "
                    "registered: register it and request the embedding again"
                )
            found = c.execute(
                insert(s.embedding_sets).values(
                    name=job.set_name,
                    encoder_id=encoder_id,
                    long_text=settings.choice("long_text", parameters.get("long_text")),
                    owner_user=job.requested_user,
                )
            ).inserted_primary_key[0]
        else:
            require_owner(c, found, job.requested_user)
        if record_source:
            c.execute(
                update(s.embedding_sets)
                .where(es.set_id == found)
                .values(source_query=parameters.get("source"), source_user=job.requested_user)
            )


def require_owner(c: Connection, set_id: int, user: str | None) -> None:
    """``heads.assert_set_owner`` on SQLite (no one is heads_admin there): 50074 unless
    ``user`` owns the set; a set without an owner is taken by ``user``."""
    row = c.execute(select(es.name, es.owner_user).where(es.set_id == set_id)).first()
    if row is None:
        return
    owner = row.owner_user
    if owner is None:  # taken by one writer: of two at once, the second reads who by
        c.execute(
            update(s.embedding_sets)
            .where(es.set_id == set_id, es.owner_user.is_(None))
            .values(owner_user=user)
        )
        owner = c.execute(select(es.owner_user).where(es.set_id == set_id)).scalar_one()
    if owner != user:
        raise SetOwnerError(
            f"set {row.name!r} belongs to another user: only its owner (or heads_admin on SQL "
            "Server) writes into it; embed into a set of your own (another --set name)"
        )

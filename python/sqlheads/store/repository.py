"""Reads and writes of the store, through SQLAlchemy Core on any supported database.

Every statement binds its values; the only SQL text taken from a caller is a source, labels or
keys query, which runs as written on a read-only connection (on SQLite, ``PRAGMA query_only``),
with the caller's own permissions, exactly as ``sp_execute_external_script``'s input query does.
"""

from __future__ import annotations

import copy
import getpass
import math
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import pandas as pd
from filelock import ReadWriteLock, Timeout
from sqlalchemy import Engine, create_engine, delete, event, func, insert, select
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, Row, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from sqlheads.errors import (
    BusyError,
    InUseError,
    InvalidNameError,
    NotFoundError,
    UnsupportedDatabaseError,
)
from sqlheads.store import applocks, claims, set_writes
from sqlheads.store import schema as s
from sqlheads.store.caller_queries import CallerQueries
from sqlheads.store.drivers import check_mssql_url
from sqlheads.store.frames import typed_frame
from sqlheads.store.keys import key_chunks
from sqlheads.store.sqlite_file import check_sqlite_file, lock_folder

NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,127}$")
SET_BUSY = (
    "another process is embedding or dropping it; wait for it to finish, then run again "
    "(embed only embeds what changed)"
)
HEAD_BUSY = (
    "another process is writing a version of it, deploying, scoring with or dropping it; try "
    "again when it has finished, or wait longer with --lock-timeout-ms"
)


def validate_name(kind: str, name: str) -> str:
    """Set, head and encoder names: a letter or _, then letters, digits, _ . - (128 at most)."""
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise InvalidNameError(
            f"{kind} name {name!r} is not allowed: use a letter or underscore followed by up to "
            "127 letters, digits, underscores, dots or hyphens (e.g. review_quality)"
        )
    return name


SUPPORTED_URLS = (
    "sqlite:///FILE (the embedded default, nothing to install) or "
    "mssql+mssqlpython://... / mssql+pyodbc://... for SQL Server (pip install 'sqlheads[mssql]')"
)


def make_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite gets WAL (readers never block the batch writer),
    foreign keys and a busy timeout, SQL Server gets the ``heads`` schema. Any other database,
    or a URL whose driver is not installed, is refused with the URLs that work."""
    try:
        parsed = make_url(url)
        backend = parsed.get_backend_name()
    except ArgumentError:
        raise UnsupportedDatabaseError(
            f"{url!r} is not a database URL: use {SUPPORTED_URLS}"
        ) from None
    if backend not in ("sqlite", "mssql"):
        raise UnsupportedDatabaseError(
            f"database URL {_shown(url)} is not supported ({backend}): use {SUPPORTED_URLS}"
        )
    if backend == "sqlite" and parsed.host:
        # sqlite://my.db parses with my.db as a host, and SQLAlchemy refuses it with a traceback
        raise UnsupportedDatabaseError(
            f"{url!r} names {parsed.host!r} as a host, and SQLite has none: a SQLite URL has "
            f"three slashes before a relative path (sqlite:///{parsed.host}) and four before "
            f"an absolute one (sqlite:////path/to/{parsed.host})"
        )
    try:
        return _create_engine(url)
    except (ImportError, NoSuchModuleError) as error:
        raise UnsupportedDatabaseError(
            f"the driver for {_shown(url)} is not installed ({error}): use {SUPPORTED_URLS}"
        ) from None


def _shown(url: str) -> str:
    """A URL as it may be printed: without its password."""
    return make_url(url).render_as_string(hide_password=True)


def _create_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        check_sqlite_file(make_url(url).database)
        engine = create_engine(url, connect_args={"timeout": 60})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection, _record) -> None:  # pragma: no branch
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA foreign_keys = ON")
            _ensure_ln(dbapi_connection)
            if url not in ("sqlite://", "sqlite:///:memory:"):
                cursor.execute("PRAGMA journal_mode = WAL")
            cursor.close()

        return engine
    check_mssql_url(url)  # mssql+mssqlpython on SQLAlchemy 2.0: say what to use instead
    return create_engine(url, deprecate_large_types=True).execution_options(
        schema_translate_map={None: s.SCHEMA}
    )


def _ensure_ln(dbapi_connection) -> None:
    """The drift view's PSI takes logarithms: SQLite built without its math functions (before
    3.35, or without SQLITE_ENABLE_MATH_FUNCTIONS) gets ``ln`` from Python on this connection."""
    try:
        dbapi_connection.execute("SELECT ln(1.0)")
    except sqlite3.OperationalError:
        dbapi_connection.create_function(
            "ln", 1, lambda x: math.log(x) if x is not None and x > 0 else None, deterministic=True
        )


@dataclass(frozen=True)
class Encoder:
    encoder_id: int
    name: str
    sha256: str
    dim: int
    max_length: int
    quantization: str


@dataclass(frozen=True)
class EmbeddingSet:
    set_id: int
    name: str
    encoder_id: int
    long_text: str
    source_query: str | None
    source_user: str | None  # who stored source_query: it runs for that user alone
    source_sid: bytes | None = None  # SQL Server: that user's USER_SID() (revision 0008)


@dataclass(frozen=True)
class Model:
    model_id: int
    head: str
    version: int
    kind: str
    set_id: int
    encoder_id: int
    accuracy: float
    macro_f1: float
    sha256: str


class Store(CallerQueries):
    """The database as sqlheads sees it (its caller queries: :class:`CallerQueries`). A
    sidecar writes for the job it holds through :meth:`for_job`'s copy."""

    claim: claims.JobClaim | None = None

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @classmethod
    def from_url(cls, url: str) -> Store:
        return cls(make_engine(url))

    def for_job(self, claim: claims.JobClaim) -> Store:
        """This store, writing for the job ``claim`` holds: on SQL Server through the
        procedures scoped to it (:mod:`sqlheads.store.claims`); the source query it records
        is its requester's."""
        held = copy.copy(self)
        held.claim = claim
        return held

    def database_user(self) -> str:
        """Who runs this store's statements: the database user on SQL Server (``USER_NAME()``),
        the OS user on SQLite (``local`` where the uid has no name, as in a bare container)."""
        if not self.is_sqlite:
            with self.engine.connect() as c:
                return str(c.exec_driver_sql("SELECT USER_NAME()").scalar_one())
        try:
            return getpass.getuser()
        except (KeyError, OSError):
            return "local"

    def is_author(self, embedding_set: EmbeddingSet) -> bool:
        """Whether this store's user stored the set's source query, so that it may run it:
        on SQL Server by security identifier (``USER_SID()``: a user dropped and made again
        under the same name is another one), on SQLite by OS user. A sidecar's store never is:
        it runs no caller's query."""
        if self.claim is not None:
            return False
        if self.is_sqlite:
            return embedding_set.source_user is not None and (
                embedding_set.source_user == self.database_user()
            )
        with self.engine.connect() as c:
            me = c.exec_driver_sql("SELECT USER_SID()").scalar_one()
        return embedding_set.source_sid is not None and bytes(embedding_set.source_sid) == bytes(me)

    @contextmanager
    def lock(
        self, kind: str, name: str, timeout_ms: int, busy: str, *, shared: bool = False
    ) -> Iterator[None]:
        """Hold ``kind:name`` against every other process on this database.

        SQL Server: ``sp_getapplock`` on the names the procedures lock, in Shared mode when
        ``shared``, else Exclusive (:mod:`sqlheads.store.applocks`). SQLite has no such lock,
        so the embedded host takes a read-write lock of the same modes (shared readers or one
        writer: ``filelock.ReadWriteLock``, an OS lock on a file of its own in ``.FILE.locks/``
        beside the database, released by the OS if the process dies). An in-memory database
        has one process. ``busy`` says what the other process is doing; it ends the error
        raised after ``timeout_ms`` (0: do not wait).
        """
        if not self.is_sqlite:
            mode = "Shared" if shared else "Exclusive"
            with applocks.server_lock(self.engine, kind, name, timeout_ms, busy, mode):
                yield
            return
        database = self.engine.url.database
        if not database or database == ":memory:":
            yield
            return
        folder = lock_folder(database)
        # One lock object per hold: a ReadWriteLock instance coordinates processes, and two
        # threads of one process each need their own to wait for each other.
        held = ReadWriteLock(
            folder / f"{kind}.{name.lower()}.rwlock", timeout=timeout_ms / 1000, is_singleton=False
        )
        try:
            try:
                held.acquire_read() if shared else held.acquire_write()
            except Timeout:
                waited = f" within {timeout_ms} ms" if timeout_ms else ""
                raise BusyError(f"{kind} {name!r} is busy{waited}: {busy}") from None
            yield
        finally:
            held.close()

    # -- encoders ------------------------------------------------------------------------------

    def find_encoder(self, name: str) -> Encoder | None:
        with self.engine.connect() as c:
            row = c.execute(_encoder_select().where(s.encoders.c.name == name)).first()
        return Encoder(**row._mapping) if row else None

    def encoder(self, encoder_id: int) -> Encoder:
        with self.engine.connect() as c:
            row = c.execute(_encoder_select().where(s.encoders.c.encoder_id == encoder_id)).one()
        return Encoder(**row._mapping)

    def encoder_listing(self) -> pd.DataFrame:
        """Every registered encoder: name, dim, max length, quantisation, source, size."""
        e = s.encoders.c
        length = func.datalength if self.engine.dialect.name == "mssql" else func.length
        query = select(
            e.name,
            e.dim,
            e.max_length,
            e.quantization,
            e.source,
            e.parity_cosine,
            length(e.onnx).label("onnx_bytes"),
        ).order_by(e.name)
        with self.engine.connect() as c:
            rows = c.execute(query).all()
        return typed_frame(rows, query.selected_columns)

    def encoder_bytes(self, encoder_id: int) -> tuple[bytes, str]:
        with self.engine.connect() as c:
            row = c.execute(
                select(s.encoders.c.onnx, s.encoders.c.tokenizer_json).where(
                    s.encoders.c.encoder_id == encoder_id
                )
            ).one()
        return bytes(row.onnx), row.tokenizer_json

    def encoder_source(self, name: str) -> Row[Any]:
        """What rebuilds encoder ``name`` in PyTorch: ``source``, ``tokenizer_json``, ``dim``,
        ``max_length``."""
        e = s.encoders.c
        with self.engine.connect() as c:
            return c.execute(
                select(e.source, e.tokenizer_json, e.dim, e.max_length).where(e.name == name)
            ).one()

    def add_encoder(self, values: dict[str, Any]) -> Encoder:
        with self.engine.begin() as c:
            c.execute(insert(s.encoders).values(**values))
        found = self.find_encoder(values["name"])
        assert found is not None
        return found

    # -- sets ----------------------------------------------------------------------------------

    def find_set(self, name: str) -> EmbeddingSet | None:
        with self.engine.connect() as c:
            row = c.execute(
                select(
                    s.embedding_sets.c.set_id,
                    s.embedding_sets.c.name,
                    s.embedding_sets.c.encoder_id,
                    s.embedding_sets.c.long_text,
                    s.embedding_sets.c.source_query,
                    s.embedding_sets.c.source_user,
                    s.embedding_sets.c.source_sid,
                ).where(s.embedding_sets.c.name == name)
            ).first()
        return EmbeddingSet(**row._mapping) if row else None

    def require_set(self, name: str) -> EmbeddingSet:
        found = self.find_set(validate_name("set", name))
        if found is None:
            raise NotFoundError(
                f"embedding set {name!r} does not exist: create it with "
                f'`sqlheads embed --set {name} --source "SELECT ... AS item_key, ... AS text"`'
            )
        return found

    def add_set(self, name: str, encoder_id: int, long_text: str) -> EmbeddingSet:
        """Create a set owned by the caller, or find it if the caller may write into it
        (50074: another user's). A sidecar's is its embed job's, with the encoder and mode the
        request recorded, owned by its requester (``heads.job_set``; the command line's on SQL
        Server ``heads.store_set``: neither login may insert sets; :mod:`set_writes`)."""
        with self.engine.begin() as c:
            set_writes.make_set(c, self._writer(), name, encoder_id, long_text)
        return self.require_set(name)

    def set_source_query(self, set_id: int, sql: str) -> None:
        """Record ``sql`` as the set's source query, and its author: the caller, or the
        requester of the job a sidecar holds, whose request recorded it (never the sidecar)."""
        with self.engine.begin() as c:
            name = c.execute(
                select(s.embedding_sets.c.name).where(s.embedding_sets.c.set_id == set_id)
            ).scalar_one()
            set_writes.record_source(c, self._writer(), set_id, name, sql)

    def _writer(self) -> set_writes.Writer:
        user = self.database_user() if self.is_sqlite else None
        return set_writes.Writer(self.is_sqlite, self.claim, user)

    def set_counts(self, set_id: int) -> dict[str, int]:
        with self.engine.connect() as c:
            embedded = c.execute(
                select(func.count()).where(s.embeddings.c.set_id == set_id)
            ).scalar_one()
            rejected = c.execute(
                select(func.count()).where(s.rejects.c.set_id == set_id)
            ).scalar_one()
        return {"set_rows": int(embedded), "set_rejects": int(rejected)}

    def drop_set(self, name: str) -> None:
        found = self.require_set(name)
        with self.lock("set", name, 0, SET_BUSY), self.engine.begin() as c:
            heads = sorted(
                {
                    r.head
                    for r in c.execute(
                        select(s.models.c.head).where(s.models.c.set_id == found.set_id)
                    )
                }
            )
            if heads:
                raise InUseError(
                    f"set {name!r} has models of head(s) {', '.join(heads)}: drop those heads "
                    "first (`sqlheads drop-head --head NAME`)"
                )
            for table in (s.predictions, s.embeddings, s.rejects):
                c.execute(delete(table).where(table.c.set_id == found.set_id))
            teachers = select(s.teachers.c.teacher_id).where(s.teachers.c.set_id == found.set_id)
            c.execute(delete(s.soft_labels).where(s.soft_labels.c.teacher_id.in_(teachers)))
            c.execute(delete(s.teachers).where(s.teachers.c.set_id == found.set_id))
            c.execute(delete(s.embedding_sets).where(s.embedding_sets.c.set_id == found.set_id))

    # -- embeddings ----------------------------------------------------------------------------

    def stored_hashes(self, set_id: int, keys: list[str]) -> dict[str, str]:
        return self._embedding_column(set_id, keys, s.embeddings.c.text_sha256)

    def _embedding_column(self, set_id: int, keys: list[str], column) -> dict[str, Any]:
        """``item_key -> column`` for those of ``keys`` the set holds, in bound key chunks."""
        result: dict[str, Any] = {}
        with self.engine.connect() as c:
            for chunk in key_chunks(keys):
                rows = c.execute(
                    select(s.embeddings.c.item_key, column).where(
                        s.embeddings.c.set_id == set_id, s.embeddings.c.item_key.in_(chunk)
                    )
                )
                result.update({key: value for key, value in rows})
        return result

    def write_embed_batch(self, set_id: int, output: pd.DataFrame) -> None:
        """One transaction: a batch lands whole or not at all. A sidecar's writes only into
        its embed job's set, the rows its request captured (``heads.write_embeddings``)."""
        with self.engine.begin() as c:
            set_writes.write_batch(c, self._writer(), set_id, output)

    def vectors_for_keys(self, set_id: int, keys: list[str]) -> dict[str, bytes]:
        found = self._embedding_column(set_id, keys, s.embeddings.c.vector)
        return {key: bytes(vector) for key, vector in found.items()}

    def iter_vectors(self, set_id: int, chunk_rows: int) -> Iterator[pd.DataFrame]:
        """Every vector of a set, by key ranges (keyset pagination: memory stays flat)."""
        last: str | None = None
        while True:
            query = (
                select(s.embeddings.c.item_key, s.embeddings.c.vector)
                .where(s.embeddings.c.set_id == set_id)
                .order_by(s.embeddings.c.item_key)
                .limit(chunk_rows)
            )
            if last is not None:
                query = query.where(s.embeddings.c.item_key > last)
            with self.engine.connect() as c:
                rows = c.execute(query).all()
            if not rows:
                return
            last = rows[-1].item_key
            yield pd.DataFrame(
                {"item_key": [r.item_key for r in rows], "vector": [bytes(r.vector) for r in rows]}
            )

    # -- models and deployments ----------------------------------------------------------------

    def add_model(self, values: dict[str, Any], connection: Connection | None = None) -> Model:
        """Number and insert a version (in ``connection``'s open transaction, if given: a
        version and its deployment are written together)."""
        with self.engine.begin() if connection is None else nullcontext(connection) as c:
            version = (
                c.execute(
                    select(func.coalesce(func.max(s.models.c.version), 0)).where(
                        s.models.c.head == values["head"]
                    )
                ).scalar_one()
                + 1
            )
            model_id = c.execute(
                insert(s.models).values(**values, version=version)
            ).inserted_primary_key[0]
            return self.model_by_id(int(model_id), c)

    def model_by_id(self, model_id: int, connection: Connection | None = None) -> Model:
        with self.engine.connect() if connection is None else nullcontext(connection) as c:
            row = c.execute(_model_select().where(s.models.c.model_id == model_id)).one()
        return Model(**row._mapping)

    def model_blob(self, model_id: int) -> bytes:
        with self.engine.connect() as c:
            return bytes(
                c.execute(
                    select(s.models.c.blob).where(s.models.c.model_id == model_id)
                ).scalar_one()
            )

    def model_record(self, model_id: int) -> dict[str, Any]:
        """Every column of a model but its blobs."""
        columns = [c for c in s.models.c if c.name not in ("blob", "onnx")]
        with self.engine.connect() as c:
            return dict(
                c.execute(select(*columns).where(s.models.c.model_id == model_id)).one()._mapping
            )

    def find_model(self, head: str, version: int | None = None) -> Model:
        """A named version, or the deployed one when ``version`` is None."""
        validate_name("head", head)
        with self.engine.connect() as c:
            if version is None:
                deployed = self._deployed_model_id(c, head)
                if deployed is None:
                    known = c.execute(
                        select(func.count()).where(s.models.c.head == head)
                    ).scalar_one()
                    if not known:
                        raise NotFoundError(
                            f"head {head!r} has no trained versions: train it first with "
                            f"`sqlheads train --head {head} --set SET --labels QUERY`"
                        )
                    raise NotFoundError(
                        f"head {head!r} has no deployed version: deploy one with "
                        f"`sqlheads deploy --head {head} --version N`, or pass --version"
                    )
                row = c.execute(_model_select().where(s.models.c.model_id == deployed)).one()
            else:
                row = c.execute(
                    _model_select().where(s.models.c.head == head, s.models.c.version == version)
                ).first()
                if row is None:
                    raise NotFoundError(
                        f"head {head!r} has no version {version}: list versions with "
                        f"`sqlheads models --head {head}`"
                    )
        return Model(**row._mapping)

    def deployed_model(self, head: str) -> Model | None:
        with self.engine.connect() as c:
            model_id = self._deployed_model_id(c, head)
        return self.model_by_id(model_id) if model_id is not None else None

    @staticmethod
    def _deployed_model_id(c: Connection, head: str) -> int | None:
        return c.execute(
            select(s.deployments.c.model_id)
            .where(s.deployments.c.head == head)
            .order_by(s.deployments.c.deployment_id.desc())
            .limit(1)
        ).scalar_one_or_none()

    def deployment_history(self, head: str) -> list[int]:
        """Model ids deployed for a head, newest first."""
        with self.engine.connect() as c:
            return [
                r.model_id
                for r in c.execute(
                    select(s.deployments.c.model_id)
                    .where(s.deployments.c.head == head)
                    .order_by(s.deployments.c.deployment_id.desc())
                )
            ]

    def drop_head(self, head: str, lock_timeout_ms: int) -> int:
        """Delete a head's versions, deployments and predictions, holding ``head`` and
        ``head.use`` Exclusive as heads.drop_head does: no predict scores with a version
        deleted under it."""
        validate_name("head", head)
        with (
            self.lock("head", head, lock_timeout_ms, HEAD_BUSY),
            self.lock("head.use", head, lock_timeout_ms, HEAD_BUSY),
            self.engine.begin() as c,
        ):
            ids = [
                r.model_id
                for r in c.execute(select(s.models.c.model_id).where(s.models.c.head == head))
            ]
            if not ids:
                raise NotFoundError(f"head {head!r} does not exist: nothing to drop")
            c.execute(delete(s.predictions).where(s.predictions.c.model_id.in_(ids)))
            c.execute(delete(s.deployments).where(s.deployments.c.head == head))
            c.execute(delete(s.models).where(s.models.c.head == head))
        return len(ids)

    def write_predictions(
        self,
        model_id: int,
        set_id: int,
        output: pd.DataFrame,
        connection: Connection | None = None,
    ) -> None:
        """Insert or replace one batch of predictions, in one transaction (``connection``'s
        open one, if given: deploy writes many batches in one)."""
        if connection is None:
            with self.engine.begin() as c:
                self.write_predictions(model_id, set_id, output, c)
            return
        rows = [
            {
                "model_id": model_id,
                "set_id": set_id,
                "item_key": r.item_key,
                "label": r.label,
                "score": float(r.score),
                "probabilities_json": r.probabilities_json,
            }
            for r in output.itertuples(index=False)
        ]
        if not rows:
            return
        with nullcontext(connection) as c:
            if self.is_sqlite:
                # One upsert instead of a delete per key chunk: the delete was a third to a half
                # of predict's time even when there was nothing to replace.
                statement = sqlite_insert(s.predictions)
                c.execute(
                    statement.on_conflict_do_update(
                        index_elements=["model_id", "set_id", "item_key"],
                        set_={
                            "label": statement.excluded.label,
                            "score": statement.excluded.score,
                            "probabilities_json": statement.excluded.probabilities_json,
                            "predicted_at": func.now(),
                        },
                    ),
                    rows,
                )
                return
            for chunk in key_chunks([row["item_key"] for row in rows]):
                c.execute(
                    delete(s.predictions).where(
                        s.predictions.c.model_id == model_id,
                        s.predictions.c.set_id == set_id,
                        s.predictions.c.item_key.in_(chunk),
                    )
                )
            c.execute(insert(s.predictions), rows)

    # -- views ---------------------------------------------------------------------------------

    def read_view(self, name: str, **filters: Any) -> pd.DataFrame:
        view = s.VIEWS[name]().subquery(name)
        query = select(view)
        for column, value in filters.items():
            if value is not None:
                query = query.where(view.c[column] == value)
        with self.engine.connect() as c:
            rows = c.execute(query).all()
            return typed_frame(rows, view.c)


def _encoder_select():
    e = s.encoders.c
    return select(e.encoder_id, e.name, e.sha256, e.dim, e.max_length, e.quantization)


def _model_select():
    m = s.models.c
    return select(
        m.model_id,
        m.head,
        m.version,
        m.kind,
        m.set_id,
        m.encoder_id,
        m.accuracy,
        m.macro_f1,
        m.sha256,
    )

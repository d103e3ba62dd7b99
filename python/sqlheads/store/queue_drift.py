"""The label queue's and drift's SQL: their views, the keys a version was labelled on, their
reads, and the labelling table ``label-queue --into`` writes.

Both views cover each head's *deployed* version and the rows it scored that it was neither
trained nor scored on at training time (its ``labelled_keys`` in its own set); a version
trained before revision 0007 recorded none and is left out of both, rather than shown with its
training rows among the "new" ones. What a version recorded at training time for drift is read
from its metrics JSON (``drift``, written by engine/loop/drift.py), limits included, so that SQL
restates no number of Python's except the histogram's bins (:data:`SCORE_BINS`).

The views here are SQLite's (JSON1: ``json_each``, ``json_extract``; ``ln``); SQL Server's are
``sql/0007/views/``, with the same columns. The verbs read the views by name on both.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd
from sqlalchemy import (
    Column,
    Float,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Unicode,
    and_,
    case,
    cast,
    column,
    func,
    insert,
    inspect,
    literal,
    or_,
    select,
    table,
)
from sqlalchemy.engine import Connection

from sqlheads.errors import InUseError, InvalidNameError
from sqlheads.store import schema as s
from sqlheads.store.keys import KEYS_PER_STATEMENT
from sqlheads.store.repository import Store

SCORE_BINS = 20  # the top probability in steps of 0.05, as engine.loop.drift.SCORE_BINS
DRIFT = "$.drift."
# A labelling table's name: one identifier, or schema.identifier; letters, digits and _ only,
# so that it needs no quoting anywhere and cannot be read as anything but a name.
TABLE_NAME = re.compile(r"^(?:([A-Za-z_][A-Za-z0-9_]{0,127})\.)?([A-Za-z_][A-Za-z0-9_]{0,127})$")


# -- the views (SQLite) -----------------------------------------------------------------------


def _drift_value(path: str):
    return func.json_extract(s.models.c.metrics_json, DRIFT + path)


def _unlabelled_rows():
    """The predictions of each head's deployed version, less the rows that version was trained
    or scored on (its labelled keys in its own set), for versions that recorded them."""
    m, p = s.models.c, s.predictions.c
    d = s.deployments.alias("d")
    deployed = (
        select(d.c.model_id)
        .where(d.c.head == m.head)
        .order_by(d.c.deployment_id.desc())
        .limit(1)
        .scalar_subquery()
    )
    recorded = s.labelled_keys.alias("recorded")
    labelled = s.labelled_keys.alias("labelled")
    return (
        select(
            m.head,
            m.version,
            p.model_id,
            p.set_id,
            p.item_key,
            p.label,
            p.score,
            p.probabilities_json,
            p.predicted_at,
        )
        .select_from(s.models)
        .join(s.predictions, p.model_id == m.model_id)
        .where(
            m.model_id == deployed,
            select(recorded.c.model_id).where(recorded.c.model_id == m.model_id).exists(),
            ~select(labelled.c.item_key)
            .where(
                labelled.c.model_id == m.model_id,
                labelled.c.item_key == p.item_key,
                p.set_id == m.set_id,
            )
            .exists(),
        )
    )


def label_queue_select():
    """Rows a person should label next for each head's deployed version, with the margin
    between the two top class probabilities (the smaller, the less sure: sort by it).
    ``sqlheads label-queue`` adds what SQL cannot: no run of near-twins (engine/loop/active)."""
    rows = _unlabelled_rows().subquery("unlabelled")
    probabilities = func.json_each(rows.c.probabilities_json).table_valued("value")
    runner_up = (
        select(probabilities.c.value)
        .order_by(probabilities.c.value.desc())
        .limit(1)
        .offset(1)
        .scalar_subquery()
    )
    return (
        select(
            rows.c.head,
            rows.c.version,
            rows.c.model_id,
            s.embedding_sets.c.name.label("set_name"),
            rows.c.item_key,
            rows.c.label.label("predicted_label"),
            rows.c.score.label("probability"),
            (rows.c.score - runner_up).label("margin"),
            rows.c.predicted_at,
        )
        .select_from(rows)
        .join(s.embedding_sets, s.embedding_sets.c.set_id == rows.c.set_id)
    )


def _grouped(name: str, *keys):
    """``COUNT(*) AS n`` of the unlabelled rows by model, set and ``keys(rows)``."""
    rows = _unlabelled_rows().subquery(f"{name}_rows")
    extra = [key(rows) for key in keys]
    return (
        select(rows.c.model_id, rows.c.set_id, *extra, func.count().label("n"))
        .group_by(rows.c.model_id, rows.c.set_id, *extra)
        .subquery(name)
    )


def _per_set(scored):
    """``(model_id, set_id)`` of ``scored``'s row, to join a grouped subquery on."""
    return {"model_id": scored.c.model_id, "set_id": scored.c.set_id}


def _psi(scored):
    """The top probability's PSI of a ``scored`` row's set against its version's held-out
    histogram (20 bins, both smoothed by the version's recorded ``smoothing``)."""
    bins = _grouped(
        "bins",
        lambda r: func.min(cast(r.c.score * SCORE_BINS, Integer), SCORE_BINS - 1).label("bin"),
    )
    smoothing = _drift_value("smoothing")
    expected = func.json_each(s.models.c.metrics_json, DRIFT + "top_probability_shares")
    expected = expected.table_valued("key", "value").alias("expected")
    actual = (func.coalesce(bins.c.n, 0) + smoothing) / (
        scored.c.rows_scored + smoothing * SCORE_BINS
    )
    same = [bins.c[k] == v for k, v in _per_set(scored).items()]
    return (
        select(func.sum((actual - expected.c.value) * func.ln(actual / expected.c.value)))
        .select_from(expected)
        .outerjoin(bins, and_(*same, bins.c.bin == expected.c.key))
        .scalar_subquery()
    )


def _share_gap(scored):
    """The largest gap between a class's share of a ``scored`` row's set and of its version's
    training labels."""
    labels = _grouped("labels", lambda r: r.c.label)
    shares = func.json_each(s.models.c.metrics_json, DRIFT + "training_class_shares")
    shares = shares.table_valued("key", "value").alias("training_shares")
    gap = func.abs(
        func.coalesce(labels.c.n, 0) * literal(1.0) / scored.c.rows_scored - shares.c.value
    )
    same = [labels.c[k] == v for k, v in _per_set(scored).items()]
    return (
        select(func.max(gap))
        .select_from(shares)
        .outerjoin(labels, and_(*same, labels.c.label == shares.c.key))
        .scalar_subquery()
    )


def drift_select():
    """One row per set each head's deployed version scored: how many new rows and when, their
    mean top probability against the held-out rows', the top probability's PSI against the
    held-out histogram, the largest gap between a class's predicted and training share, and
    whether these pass the version's recorded limits (``judged`` 0: fewer rows than its
    minimum, or no reference). ``sqlheads drift`` adds the embedding shift (vectors)."""
    new = _unlabelled_rows().subquery("new_rows")
    scored = (
        select(
            new.c.model_id,
            new.c.set_id,
            func.count().label("rows_scored"),
            func.min(new.c.predicted_at).label("first_predicted_at"),
            func.max(new.c.predicted_at).label("last_predicted_at"),
            func.avg(new.c.score).label("mean_top_probability"),
        )
        .group_by(new.c.model_id, new.c.set_id)
        .subquery("scored")
    )
    figures = (
        select(
            s.models.c.head,
            s.models.c.version,
            scored.c.model_id,
            s.embedding_sets.c.name.label("set_name"),
            scored.c.rows_scored,
            scored.c.first_predicted_at,
            scored.c.last_predicted_at,
            scored.c.mean_top_probability,
            _drift_value("held_out_mean_top_probability").label("held_out_mean_top_probability"),
            _psi(scored).label("top_probability_psi"),
            _share_gap(scored).label("largest_share_gap"),
            _drift_value("held_out_rows").label("held_out_rows"),
            _drift_value("min_rows").label("min_rows"),
            _drift_value("limits.psi").label("psi_limit"),
            _drift_value("limits.confidence").label("confidence_limit"),
            _drift_value("limits.share").label("share_limit"),
        )
        .select_from(scored)
        .join(s.models, s.models.c.model_id == scored.c.model_id)
        .join(s.embedding_sets, s.embedding_sets.c.set_id == scored.c.set_id)
        .subquery("figures")
    )
    f = figures.c
    judged = f.rows_scored >= f.min_rows
    # the PSI two samples of these sizes show by chance is added (engine.loop.drift.psi_noise)
    held_out = func.nullif(f.held_out_rows, 0)  # none: no PSI either, and no division by 0
    noise = (SCORE_BINS - 1) * (literal(1.0) / f.rows_scored + literal(1.0) / held_out)
    passed = or_(
        f.top_probability_psi > f.psi_limit + noise,
        func.abs(f.mean_top_probability - f.held_out_mean_top_probability) > f.confidence_limit,
        f.largest_share_gap > f.share_limit,
    )
    return select(
        f.head,
        f.version,
        f.model_id,
        f.set_name,
        f.rows_scored,
        f.first_predicted_at,
        f.last_predicted_at,
        f.mean_top_probability,
        f.held_out_mean_top_probability,
        f.top_probability_psi,
        f.largest_share_gap,
        case((judged, 1), else_=0).label("judged"),
        case((and_(judged, passed), 1), else_=0).label("drifted"),
    ).select_from(figures)


VIEWS = {"label_queue": label_queue_select, "drift": drift_select}


def _view(store: Store, name: str):
    """The view ``name`` by name (``heads.NAME`` on SQL Server), with its columns."""
    names = list(VIEWS[name]().selected_columns.keys())
    return table(name, *(column(n) for n in names), schema=None if store.is_sqlite else s.SCHEMA)


# -- labelled keys ----------------------------------------------------------------------------


def record_labelled_keys(connection: Connection, model_id: int, keys: Sequence[str]) -> None:
    """The keys a new version was trained or scored on, in its own transaction."""
    unique = list(dict.fromkeys(str(k) for k in keys))
    for start in range(0, len(unique), KEYS_PER_STATEMENT):
        chunk = unique[start : start + KEYS_PER_STATEMENT]
        connection.execute(
            insert(s.labelled_keys), [{"model_id": model_id, "item_key": k} for k in chunk]
        )


def labelled_keys_recorded(store: Store, model_id: int) -> bool:
    with store.engine.connect() as c:
        found = c.execute(
            select(s.labelled_keys.c.model_id).where(s.labelled_keys.c.model_id == model_id)
        ).first()
    return found is not None


# -- reads ------------------------------------------------------------------------------------


def queue_rows(store: Store, model_id: int, set_name: str | None, limit: int) -> pd.DataFrame:
    """The version's first ``limit`` rows of ``label_queue``, least margin first (ties by set
    and key, so that a queue is the same on every run)."""
    view = _view(store, "label_queue")
    query = select(view).where(view.c.model_id == model_id)
    if set_name is not None:
        query = query.where(view.c.set_name == set_name)
    query = query.order_by(view.c.margin, view.c.set_name, view.c.item_key).limit(limit)
    with store.engine.connect() as c:
        rows = c.execute(query).all()
    return pd.DataFrame([tuple(r) for r in rows], columns=list(view.c.keys()))


def queue_margins(store: Store, model_id: int) -> np.ndarray:
    """The margin of every row in the version's queue (the report's histogram)."""
    view = _view(store, "label_queue")
    with store.engine.connect() as c:
        found = c.execute(select(view.c.margin).where(view.c.model_id == model_id)).scalars()
        return np.asarray([float(m) for m in found], dtype=np.float64)


def drift_rows(store: Store, model_id: int) -> pd.DataFrame:
    view = _view(store, "drift")
    query = select(view).where(view.c.model_id == model_id).order_by(view.c.set_name)
    with store.engine.connect() as c:
        rows = c.execute(query).all()
    return pd.DataFrame([tuple(r) for r in rows], columns=list(view.c.keys()))


def predicted_shares(store: Store, model_id: int) -> dict[str, dict[str, float]]:
    """``{set: {label: share}}`` of the version's unlabelled rows (what drift compares)."""
    rows = _unlabelled_rows().subquery("rows")
    query = (
        select(s.embedding_sets.c.name, rows.c.label, func.count().label("n"))
        .select_from(rows)
        .join(s.embedding_sets, s.embedding_sets.c.set_id == rows.c.set_id)
        .where(rows.c.model_id == model_id)
        .group_by(s.embedding_sets.c.name, rows.c.label)
    )
    shares: dict[str, dict[str, float]] = {}
    with store.engine.connect() as c:
        for name, label, n in c.execute(query):
            shares.setdefault(name, {})[label] = int(n)
    return {
        name: {label: n / sum(counts.values()) for label, n in sorted(counts.items())}
        for name, counts in shares.items()
    }


def unlabelled_keys(store: Store, model_id: int, set_name: str) -> list[str]:
    """Every key of the set the version scored and was not labelled on, in key order."""
    rows = _unlabelled_rows().subquery("rows")
    query = (
        select(rows.c.item_key)
        .join(s.embedding_sets, s.embedding_sets.c.set_id == rows.c.set_id)
        .where(rows.c.model_id == model_id, s.embedding_sets.c.name == set_name)
        .order_by(rows.c.item_key)
    )
    with store.engine.connect() as c:
        return [r.item_key for r in c.execute(query)]


# -- the labelling table ----------------------------------------------------------------------


def labelling_table(store: Store, name: str) -> Table:
    """The table ``label-queue --into NAME`` writes, its name checked (never pasted into SQL:
    SQLAlchemy quotes it). On SQL Server an unqualified name is ``dbo``'s, not ``heads``'."""
    matched = TABLE_NAME.match(name) if isinstance(name, str) else None
    if matched is None:
        raise InvalidNameError(
            f"table name {name!r} is not allowed: use letters, digits and underscores, starting "
            "with a letter or underscore, optionally after a schema and a dot (e.g. "
            "label_round_1 or dbo.label_round_1)"
        )
    schema, bare = matched.groups()
    if store.is_sqlite and schema is not None:
        raise InvalidNameError(
            f"table name {name!r} names a schema, which SQLite does not have: drop {schema}."
        )
    return Table(
        bare,
        MetaData(),
        Column("queue_rank", Integer, nullable=False),
        Column("item_key", Unicode(s.KEY_LENGTH), nullable=False),
        Column("label", Unicode(400), nullable=True),
        Column("set_name", Unicode(s.NAME_LENGTH), nullable=False),
        Column("predicted_label", Unicode(400), nullable=False),
        Column("probability", Float, nullable=False),
        Column("margin", Float, nullable=False),
        Column("head", Unicode(s.NAME_LENGTH), nullable=False),
        Column("version", Integer, nullable=False),
        PrimaryKeyConstraint("set_name", "item_key"),
        schema=schema or (None if store.is_sqlite else "dbo"),
    )


def write_labelling_table(store: Store, target: Table, rows: pd.DataFrame, replace: bool) -> None:
    """Create ``target`` and fill it with ``rows`` (``label`` NULL) in one transaction; a table
    of that name that exists already is refused unless ``replace``."""
    shown = f"{target.schema}.{target.name}" if target.schema else target.name
    with store.engine.begin() as c:
        if inspect(c).has_table(target.name, schema=target.schema):
            if not replace:
                raise InUseError(
                    f"table {shown!r} exists already: name a new table for this round, or pass "
                    "--replace to overwrite it (its labels are lost)"
                )
            target.drop(c)
        target.create(c)
        records = rows.assign(label=None)[[col.name for col in target.columns]]
        if len(records):
            c.execute(insert(target), records.to_dict("records"))

"""release 0007

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25 12:00:00.000000

Several concerns add to this revision, each in functions of its own called from ``upgrade()``
and ``downgrade()``. The T-SQL objects it creates or changes are in ``sql/0007/``, applied once,
after every concern's table changes (and reverted before them).

The third SQL Server audit: ``embedding_sets.source_user``, the database user (SQL Server) or
OS user (SQLite) who stored the set's source query, which then runs for that user alone; on SQL
Server, stored queries checked by ``heads.set_source``, the sidecar's writes scoped to the job
it holds (``heads.assert_job_held``, ``heads.add_version``, ``heads.store_soft_labels``,
``heads.job_set``) and its table grants narrowed, the sets view ``heads.sets`` without query
texts for analysts, and the smaller fixes of ``sql/0007/``.

Transfer sets (students that carry their teacher): ``transfer_sets`` and ``transfer_rows`` hold
the rows a teacher version labelled for distillation (sentences of long rows, augmented copies
of training rows) with its logits, keyed by teacher version and recipe, so that a second
student of the same teacher reuses them; dropping the teacher's head drops them.

The label queue and drift: ``labelled_keys`` records, for every version trained from now on,
the keys whose gold labels it was trained or scored on (its training and held-out rows), so
that the views can leave them out; versions trained before this revision recorded none and are
left out of both views. SQLite's views ``label_queue`` and ``drift`` are created here (frozen
text of ``store/queue_drift.py``'s selects); SQL Server's come from ``sql/0007/views/``, with
``heads.write_version`` and ``heads.add_version`` writing ``labelled_keys`` and
``heads_reader`` granted SELECT on both views.

Declared types of the views' flags: SQLite gives a view column a declared type only when it is
a table's column, so ``model_summary``'s ``is_deployed`` and ``below_baseline`` (0/1 from a
CASE) had none, and a BI tool that reads declared types saw NULL. They are now read from
``bit_values``, a two-row table (0 and 1) made for that, and are INTEGER. SQL Server infers its
view's types itself (``sql/0006/views/model_summary.sql`` is unchanged); the table exists there
too, because the one metadata (and the Python read of ``model_summary``) has it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import sqlheads_sql
from sqlheads.settings import SETTINGS
from sqlheads.store.schema import BITS, KEY_LENGTH, NAME_LENGTH
from sqlheads.store.schema import SCHEMA as MSSQL_SCHEMA

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

IS_MSSQL = op.get_context().dialect.name == "mssql"
SCHEMA = MSSQL_SCHEMA if IS_MSSQL else None


# -- audit: who stored a set's source query ------------------------------------------------------


def _audit_upgrade() -> None:
    # NULL for queries stored before this revision: no author is known, so they run for no one
    # until the set is embedded again (or the caller passes a source of their own).
    op.add_column(
        "embedding_sets",
        sa.Column("source_user", sa.Unicode(NAME_LENGTH), nullable=True),
        schema=SCHEMA,
    )


def _audit_downgrade() -> None:
    if IS_MSSQL:
        op.drop_column("embedding_sets", "source_user", schema=SCHEMA)
    else:  # natively (SQLite 3.35+), as 0006 drops its columns
        op.execute("ALTER TABLE embedding_sets DROP COLUMN source_user")


# -- transfer sets: the rows a teacher version labelled, for its next student --------------------


def _ref(column: str) -> str:
    return f"{SCHEMA}.{column}" if SCHEMA else column


def _transfer_upgrade() -> None:
    op.create_table(
        "transfer_sets",
        sa.Column("transfer_set_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("recipe_key", sa.String(length=64), nullable=False),
        sa.Column("recipe_json", sa.UnicodeText(), nullable=False),
        sa.Column("classes_json", sa.UnicodeText(), nullable=False),
        sa.Column("rows_max", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(), server_default=sa.func.now(), nullable=False),
        sa.ForeignKeyConstraint(
            ["model_id"],
            [_ref("models.model_id")],
            name=op.f("fk_transfer_sets_model_id_models"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("transfer_set_id", name=op.f("pk_transfer_sets")),
        sa.UniqueConstraint(
            "model_id", "recipe_key", name=op.f("uq_transfer_sets_model_id_recipe_key")
        ),
        schema=SCHEMA,
    )
    op.create_table(
        "transfer_rows",
        sa.Column("transfer_set_id", sa.Integer(), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("origin_key", sa.Unicode(length=KEY_LENGTH), nullable=False),
        sa.Column("how", sa.String(length=16), nullable=False),
        sa.Column("text", sa.UnicodeText(), nullable=False),
        sa.Column("logits", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["transfer_set_id"],
            [_ref("transfer_sets.transfer_set_id")],
            name=op.f("fk_transfer_rows_transfer_set_id_transfer_sets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("transfer_set_id", "ordinal", name=op.f("pk_transfer_rows")),
        schema=SCHEMA,
    )


def _transfer_downgrade() -> None:
    op.drop_table("transfer_rows", schema=SCHEMA)
    op.drop_table("transfer_sets", schema=SCHEMA)


# -- the label queue and drift ----------------------------------------------------------------

# The views as this revision creates them on SQLite, frozen (see 0001's VIEWS_SQL).
QUEUE_DRIFT_VIEWS = {
    "label_queue": """SELECT unlabelled.head, unlabelled.version, unlabelled.model_id, embedding_sets.name AS set_name, unlabelled.item_key, unlabelled.label AS predicted_label, unlabelled.score AS probability, unlabelled.score - (SELECT anon_1.value 
FROM json_each(unlabelled.probabilities_json) AS anon_1 ORDER BY anon_1.value DESC
 LIMIT 1 OFFSET 1) AS margin, unlabelled.predicted_at 
FROM (SELECT models.head AS head, models.version AS version, predictions.model_id AS model_id, predictions.set_id AS set_id, predictions.item_key AS item_key, predictions.label AS label, predictions.score AS score, predictions.probabilities_json AS probabilities_json, predictions.predicted_at AS predicted_at 
FROM models JOIN predictions ON predictions.model_id = models.model_id 
WHERE models.model_id = (SELECT d.model_id 
FROM deployments AS d 
WHERE d.head = models.head ORDER BY d.deployment_id DESC
 LIMIT 1 OFFSET 0) AND (EXISTS (SELECT recorded.model_id 
FROM labelled_keys AS recorded 
WHERE recorded.model_id = models.model_id)) AND NOT (EXISTS (SELECT labelled.item_key 
FROM labelled_keys AS labelled 
WHERE labelled.model_id = models.model_id AND labelled.item_key = predictions.item_key AND predictions.set_id = models.set_id))) AS unlabelled JOIN embedding_sets ON embedding_sets.set_id = unlabelled.set_id""",  # noqa: W291, E501
    "drift": """SELECT figures.head, figures.version, figures.model_id, figures.set_name, figures.rows_scored, figures.first_predicted_at, figures.last_predicted_at, figures.mean_top_probability, figures.held_out_mean_top_probability, figures.top_probability_psi, figures.largest_share_gap, CASE WHEN (figures.rows_scored >= figures.min_rows) THEN 1 ELSE 0 END AS judged, CASE WHEN (figures.rows_scored >= figures.min_rows AND (figures.top_probability_psi > figures.psi_limit + 19 * (1.0 / (figures.rows_scored + 0.0) + 1.0 / (nullif(figures.held_out_rows, 0) + 0.0)) OR abs(figures.mean_top_probability - figures.held_out_mean_top_probability) > figures.confidence_limit OR figures.largest_share_gap > figures.share_limit)) THEN 1 ELSE 0 END AS drifted 
FROM (SELECT models.head AS head, models.version AS version, scored.model_id AS model_id, embedding_sets.name AS set_name, scored.rows_scored AS rows_scored, scored.first_predicted_at AS first_predicted_at, scored.last_predicted_at AS last_predicted_at, scored.mean_top_probability AS mean_top_probability, json_extract(models.metrics_json, '$.drift.held_out_mean_top_probability') AS held_out_mean_top_probability, (SELECT sum(((coalesce(bins.n, 0) + json_extract(models.metrics_json, '$.drift.smoothing')) / ((scored.rows_scored + json_extract(models.metrics_json, '$.drift.smoothing') * 20) + 0.0) - expected.value) * ln(((coalesce(bins.n, 0) + json_extract(models.metrics_json, '$.drift.smoothing')) / ((scored.rows_scored + json_extract(models.metrics_json, '$.drift.smoothing') * 20) + 0.0)) / (expected.value + 0.0))) AS sum_1 
FROM json_each(models.metrics_json, '$.drift.top_probability_shares') AS expected LEFT OUTER JOIN (SELECT bins_rows.model_id AS model_id, bins_rows.set_id AS set_id, min(CAST(bins_rows.score * 20 AS INTEGER), 19) AS bin, count(*) AS n 
FROM (SELECT models.head AS head, models.version AS version, predictions.model_id AS model_id, predictions.set_id AS set_id, predictions.item_key AS item_key, predictions.label AS label, predictions.score AS score, predictions.probabilities_json AS probabilities_json, predictions.predicted_at AS predicted_at 
FROM models JOIN predictions ON predictions.model_id = models.model_id 
WHERE models.model_id = (SELECT d.model_id 
FROM deployments AS d 
WHERE d.head = models.head ORDER BY d.deployment_id DESC
 LIMIT 1 OFFSET 0) AND (EXISTS (SELECT recorded.model_id 
FROM labelled_keys AS recorded 
WHERE recorded.model_id = models.model_id)) AND NOT (EXISTS (SELECT labelled.item_key 
FROM labelled_keys AS labelled 
WHERE labelled.model_id = models.model_id AND labelled.item_key = predictions.item_key AND predictions.set_id = models.set_id))) AS bins_rows GROUP BY bins_rows.model_id, bins_rows.set_id, min(CAST(bins_rows.score * 20 AS INTEGER), 19)) AS bins ON bins.model_id = scored.model_id AND bins.set_id = scored.set_id AND bins.bin = expected."key") AS top_probability_psi, (SELECT max(abs((coalesce(labels.n, 0) * 1.0) / (scored.rows_scored + 0.0) - training_shares.value)) AS max_1 
FROM json_each(models.metrics_json, '$.drift.training_class_shares') AS training_shares LEFT OUTER JOIN (SELECT labels_rows.model_id AS model_id, labels_rows.set_id AS set_id, labels_rows.label AS label, count(*) AS n 
FROM (SELECT models.head AS head, models.version AS version, predictions.model_id AS model_id, predictions.set_id AS set_id, predictions.item_key AS item_key, predictions.label AS label, predictions.score AS score, predictions.probabilities_json AS probabilities_json, predictions.predicted_at AS predicted_at 
FROM models JOIN predictions ON predictions.model_id = models.model_id 
WHERE models.model_id = (SELECT d.model_id 
FROM deployments AS d 
WHERE d.head = models.head ORDER BY d.deployment_id DESC
 LIMIT 1 OFFSET 0) AND (EXISTS (SELECT recorded.model_id 
FROM labelled_keys AS recorded 
WHERE recorded.model_id = models.model_id)) AND NOT (EXISTS (SELECT labelled.item_key 
FROM labelled_keys AS labelled 
WHERE labelled.model_id = models.model_id AND labelled.item_key = predictions.item_key AND predictions.set_id = models.set_id))) AS labels_rows GROUP BY labels_rows.model_id, labels_rows.set_id, labels_rows.label) AS labels ON labels.model_id = scored.model_id AND labels.set_id = scored.set_id AND labels.label = training_shares."key") AS largest_share_gap, json_extract(models.metrics_json, '$.drift.held_out_rows') AS held_out_rows, json_extract(models.metrics_json, '$.drift.min_rows') AS min_rows, json_extract(models.metrics_json, '$.drift.limits.psi') AS psi_limit, json_extract(models.metrics_json, '$.drift.limits.confidence') AS confidence_limit, json_extract(models.metrics_json, '$.drift.limits.share') AS share_limit 
FROM (SELECT new_rows.model_id AS model_id, new_rows.set_id AS set_id, count(*) AS rows_scored, min(new_rows.predicted_at) AS first_predicted_at, max(new_rows.predicted_at) AS last_predicted_at, avg(new_rows.score) AS mean_top_probability 
FROM (SELECT models.head AS head, models.version AS version, predictions.model_id AS model_id, predictions.set_id AS set_id, predictions.item_key AS item_key, predictions.label AS label, predictions.score AS score, predictions.probabilities_json AS probabilities_json, predictions.predicted_at AS predicted_at 
FROM models JOIN predictions ON predictions.model_id = models.model_id 
WHERE models.model_id = (SELECT d.model_id 
FROM deployments AS d 
WHERE d.head = models.head ORDER BY d.deployment_id DESC
 LIMIT 1 OFFSET 0) AND (EXISTS (SELECT recorded.model_id 
FROM labelled_keys AS recorded 
WHERE recorded.model_id = models.model_id)) AND NOT (EXISTS (SELECT labelled.item_key 
FROM labelled_keys AS labelled 
WHERE labelled.model_id = models.model_id AND labelled.item_key = predictions.item_key AND predictions.set_id = models.set_id))) AS new_rows GROUP BY new_rows.model_id, new_rows.set_id) AS scored JOIN models ON models.model_id = scored.model_id JOIN embedding_sets ON embedding_sets.set_id = scored.set_id) AS figures""",  # noqa: W291, E501
}


def _queue_drift_upgrade() -> None:
    op.create_table(
        "labelled_keys",
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("item_key", sa.Unicode(length=KEY_LENGTH), nullable=False),
        sa.ForeignKeyConstraint(
            ["model_id"],
            [_ref("models.model_id")],
            name=op.f("fk_labelled_keys_model_id_models"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("model_id", "item_key", name=op.f("pk_labelled_keys")),
        schema=SCHEMA,
    )
    if not IS_MSSQL:
        for name, sql in QUEUE_DRIFT_VIEWS.items():
            op.execute(f"CREATE VIEW {name} AS {sql}")


def _queue_drift_downgrade() -> None:
    if not IS_MSSQL:
        for name in QUEUE_DRIFT_VIEWS:
            op.execute(f"DROP VIEW IF EXISTS {name}")
    op.drop_table("labelled_keys", schema=SCHEMA)


# -- the views' flags get a declared type (SQLite) ------------------------------------------------

# model_summary as revision 0006 left it on SQLite, and as this revision makes it (frozen).
MODEL_SUMMARY_0006 = """SELECT models.head, models.version, models.model_id, models.kind, embedding_sets.name AS set_name, encoders.name AS encoder_name, models.accuracy, models.macro_f1, models.rows_train, models.rows_test, models.seconds, models.created_at, CASE WHEN (current_deployments.model_id IS NOT NULL) THEN 1 ELSE 0 END AS is_deployed, models.parameters, teachers.name AS teacher, models.teacher_accuracy, models.baseline_accuracy, models.baseline_macro_f1, models.baseline_seconds, models.baseline_skipped, CASE WHEN (models.accuracy < models.baseline_accuracy) THEN 1 ELSE 0 END AS below_baseline 
FROM models JOIN embedding_sets ON embedding_sets.set_id = models.set_id JOIN encoders ON encoders.encoder_id = models.encoder_id LEFT OUTER JOIN teachers ON teachers.teacher_id = models.teacher_id LEFT OUTER JOIN (SELECT deployments.head AS head, deployments.model_id AS model_id, deployments.deployed_at AS deployed_at 
FROM deployments JOIN (SELECT deployments.head AS head, max(deployments.deployment_id) AS deployment_id 
FROM deployments GROUP BY deployments.head) AS newest ON deployments.deployment_id = newest.deployment_id) AS current_deployments ON current_deployments.model_id = models.model_id"""  # noqa: W291, E501

MODEL_SUMMARY_TYPED = """SELECT models.head, models.version, models.model_id, models.kind, embedding_sets.name AS set_name, encoders.name AS encoder_name, models.accuracy, models.macro_f1, models.rows_train, models.rows_test, models.seconds, models.created_at, deployed_bit.bit AS is_deployed, models.parameters, teachers.name AS teacher, models.teacher_accuracy, models.baseline_accuracy, models.baseline_macro_f1, models.baseline_seconds, models.baseline_skipped, below_bit.bit AS below_baseline 
FROM models JOIN embedding_sets ON embedding_sets.set_id = models.set_id JOIN encoders ON encoders.encoder_id = models.encoder_id LEFT OUTER JOIN teachers ON teachers.teacher_id = models.teacher_id LEFT OUTER JOIN (SELECT deployments.head AS head, deployments.model_id AS model_id, deployments.deployed_at AS deployed_at 
FROM deployments JOIN (SELECT deployments.head AS head, max(deployments.deployment_id) AS deployment_id 
FROM deployments GROUP BY deployments.head) AS newest ON deployments.deployment_id = newest.deployment_id) AS current_deployments ON current_deployments.model_id = models.model_id JOIN bit_values AS deployed_bit ON deployed_bit.bit = CASE WHEN (current_deployments.model_id IS NOT NULL) THEN 1 ELSE 0 END JOIN bit_values AS below_bit ON below_bit.bit = CASE WHEN (models.accuracy < models.baseline_accuracy) THEN 1 ELSE 0 END"""  # noqa: W291, E501


def _replace_model_summary(sql: str) -> None:
    op.execute("DROP VIEW IF EXISTS model_summary")
    op.execute(f"CREATE VIEW model_summary AS {sql}")


def _view_types_upgrade() -> None:
    op.create_table(
        "bit_values",
        sa.Column("bit", sa.Integer(), autoincrement=False, nullable=False),
        sa.CheckConstraint("bit IN (0, 1)", name=op.f("ck_bit_values_zero_or_one")),
        sa.PrimaryKeyConstraint("bit", name=op.f("pk_bit_values")),
        schema=SCHEMA,
    )
    # A plain INSERT: bulk_insert's SQL Server script would turn IDENTITY_INSERT on for a table
    # that has no identity column.
    table = f"{SCHEMA}.bit_values" if SCHEMA else "bit_values"
    values = ", ".join(f"({bit})" for bit in BITS)
    op.execute(f"INSERT INTO {table} (bit) VALUES {values}")
    if not IS_MSSQL:
        _replace_model_summary(MODEL_SUMMARY_TYPED)


def _view_types_downgrade() -> None:
    if not IS_MSSQL:
        _replace_model_summary(MODEL_SUMMARY_0006)
    op.drop_table("bit_values", schema=SCHEMA)


def upgrade() -> None:
    _audit_upgrade()
    _transfer_upgrade()
    _queue_drift_upgrade()
    _view_types_upgrade()
    # the T-SQL objects of sql/0007 (every concern's), after every table they use
    if IS_MSSQL:
        sqlheads_sql.run(sqlheads_sql.upgrade_batches(revision, SETTINGS))


def downgrade() -> None:
    if IS_MSSQL:
        sqlheads_sql.run(sqlheads_sql.downgrade_batches(revision, SETTINGS))
    _view_types_downgrade()
    _queue_drift_downgrade()
    _transfer_downgrade()
    _audit_downgrade()

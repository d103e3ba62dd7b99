"""release: deploy and roll-back re-score instead of blanking latest_predictions

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24 12:00:00.000000

Issue 20 (point 1): ``latest_predictions`` shows each row's prediction by the most recently
deployed version of its head that has one, so that the predictions a deploy could not replace
(a text model whose set has no known source) stay in view until ``predict`` runs (SQLite here;
SQL Server from ``sql/0006/``, which also holds ``heads.deploy`` and ``heads.roll_back`` that
re-score the replaced rows in the deploy's transaction and prune the predictions they replace).
"""

from __future__ import annotations

import sqlheads_sql
from alembic import op

from sqlheads.procedures import SETTINGS

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

IS_MSSQL = op.get_context().dialect.name == "mssql"

# Issue 20: latest_predictions as 0001 created it, and as this revision makes it (frozen).
LATEST_PREDICTIONS_BEFORE = """SELECT models.head, models.version, predictions.model_id, embedding_sets.name AS set_name, predictions.item_key, predictions.label, predictions.score, predictions.probabilities_json, predictions.predicted_at 
FROM predictions JOIN (SELECT deployments.head AS head, deployments.model_id AS model_id, deployments.deployed_at AS deployed_at 
FROM deployments JOIN (SELECT deployments.head AS head, max(deployments.deployment_id) AS deployment_id 
FROM deployments GROUP BY deployments.head) AS newest ON deployments.deployment_id = newest.deployment_id) AS current_deployments ON current_deployments.model_id = predictions.model_id JOIN models ON models.model_id = predictions.model_id JOIN embedding_sets ON embedding_sets.set_id = predictions.set_id"""  # noqa: W291, E501

LATEST_PREDICTIONS_AFTER = """SELECT models.head, models.version, predictions.model_id, embedding_sets.name AS set_name, predictions.item_key, predictions.label, predictions.score, predictions.probabilities_json, predictions.predicted_at 
FROM predictions JOIN (SELECT deployments.model_id AS model_id, deployments.head AS head, max(deployments.deployment_id) AS deployment_id 
FROM deployments GROUP BY deployments.model_id, deployments.head) AS shown ON shown.model_id = predictions.model_id JOIN (SELECT deployments.head AS head, max(deployments.deployment_id) AS deployment_id 
FROM deployments GROUP BY deployments.head) AS newest ON newest.head = shown.head JOIN models ON models.model_id = predictions.model_id JOIN embedding_sets ON embedding_sets.set_id = predictions.set_id 
WHERE shown.deployment_id = newest.deployment_id OR NOT (EXISTS (SELECT newer_predictions.model_id 
FROM predictions AS newer_predictions 
WHERE newer_predictions.model_id IN (SELECT later.model_id 
FROM deployments AS later 
WHERE later.head = shown.head AND later.deployment_id > shown.deployment_id) AND newer_predictions.set_id = predictions.set_id AND newer_predictions.item_key = predictions.item_key))"""  # noqa: W291, E501


def _replace_latest_predictions(sql: str) -> None:
    op.execute("DROP VIEW IF EXISTS latest_predictions")
    op.execute(f"CREATE VIEW latest_predictions AS {sql}")


def upgrade() -> None:
    if IS_MSSQL:  # sql/0006
        sqlheads_sql.run(sqlheads_sql.upgrade_batches(revision, SETTINGS))
        return
    # Issue 20: latest_predictions keeps the predictions a deploy could not replace.
    _replace_latest_predictions(LATEST_PREDICTIONS_AFTER)


def downgrade() -> None:
    if IS_MSSQL:
        sqlheads_sql.run(sqlheads_sql.downgrade_batches(revision, SETTINGS))
        return
    _replace_latest_predictions(LATEST_PREDICTIONS_BEFORE)

"""teacher vectors beside the transfer rows' soft labels

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03 12:00:00.000000

``transfer_rows.vector``: the teacher encoder's vector of each transfer row (float16 bytes), kept
beside its logits when a teacher head that reads vectors scores the row, so that an encoder
student can learn the teacher's vectors as well as its probabilities (the feature loss of
``engine/students/encoder.py``) without embedding a row twice. NULL for a teacher that reads
text (a fine-tuned one has no encoder of its own) and for rows cached before this revision.
Both databases; no T-SQL object reads or writes the column (SQL Server's ``heads.distill``
scores its transfer rows on every call and keeps none; ``heads.write_transfer_rows``, revision
0008, writes a sidecar's fine-tuned teacher's rows, which reads text and has no vectors), so
the revision has no ``sql/`` folder.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from sqlheads.store.schema import SCHEMA as MSSQL_SCHEMA

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

IS_MSSQL = op.get_context().dialect.name == "mssql"
SCHEMA = MSSQL_SCHEMA if IS_MSSQL else None


def upgrade() -> None:
    op.add_column(
        "transfer_rows", sa.Column("vector", sa.LargeBinary(), nullable=True), schema=SCHEMA
    )


def downgrade() -> None:
    if IS_MSSQL:
        op.drop_column("transfer_rows", "vector", schema=SCHEMA)
    else:  # natively (SQLite 3.35+), as 0007 drops its column
        op.execute("ALTER TABLE transfer_rows DROP COLUMN vector")

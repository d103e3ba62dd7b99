"""Alembic migrations of the sqlheads store (shipped in the wheel as ``sqlheads_migrations``)."""

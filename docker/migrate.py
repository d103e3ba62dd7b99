"""One-shot set-up of a fresh SQL Server for sqlheads (the compose stack's ``migrate`` service).

1. creates the database if it is missing; 2. runs sql/setup.sql (external scripts enabled);
3. runs the migrations (tables, views, procedures, roles); 4. registers the default encoder.
Every step is harmless to repeat. URLs: ``SQLHEADS_MSSQL_MASTER_URL`` (the master database,
as a sysadmin) and ``SQLHEADS_MSSQL_URL`` (the sqlheads database).
"""

from __future__ import annotations

import os

import sqlheads_sql
from sqlalchemy import create_engine, text

from sqlheads import host
from sqlheads.store.repository import Store


def main() -> None:
    master = create_engine(os.environ["SQLHEADS_MSSQL_MASTER_URL"], isolation_level="AUTOCOMMIT")
    database = os.environ.get("SQLHEADS_MSSQL_DATABASE", "sqlheads")
    with master.connect() as connection:
        exists = connection.execute(text("SELECT DB_ID(:name)"), {"name": database}).scalar()
        if exists is None:
            quoted = connection.execute(
                text("SELECT QUOTENAME(:name)"), {"name": database}
            ).scalar()
            connection.exec_driver_sql(f"CREATE DATABASE {quoted}")
        for batch in sqlheads_sql.batches(sqlheads_sql.ROOT / "setup.sql"):
            connection.exec_driver_sql(batch)
    store = Store.from_url(os.environ["SQLHEADS_MSSQL_URL"])
    print(host.init(store))
    encoder = host.register_encoder(store)
    print(f"default encoder {encoder.name} ({encoder.sha256[:12]}) registered")


if __name__ == "__main__":
    main()

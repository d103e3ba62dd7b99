"""One-shot set-up of a fresh SQL Server for sqlheads (the compose stack's ``migrate`` service).

1. creates the database if it is missing, refuses one below compatibility level 160 with the
fix before anything is created in it (50075; the fourth audit, finding 7), and turns
READ_COMMITTED_SNAPSHOT on in it; 2. runs sql/setup.sql (external scripts enabled); 3. runs the
migrations (tables, views, procedures, roles); 4. registers the default encoder; 5. when
``SIDECAR_PASSWORD`` is set, creates the GPU sidecar's login ``heads_sidecar_login`` (or sets its
password), its user in the database, and puts it in the role ``heads_sidecar``; 6. runs the
smoke checks (docker/smoke.sql) and exits 1 on what they find wrong, with the fix: above all a
module signature that does not reach ``sys.sp_execute_external_script`` (finding 8). Every
step is harmless to repeat. URLs: ``SQLHEADS_MSSQL_MASTER_URL`` (the master database, as a
sysadmin) and ``SQLHEADS_MSSQL_URL`` (the sqlheads database).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import sqlheads_sql
from sqlalchemy import Engine, create_engine, text

from sqlheads import host
from sqlheads.errors import ServerSetupError
from sqlheads.store.repository import Store
from sqlheads.store.server_checks import check_compatibility, smoke_problems

SIDECAR_LOGIN = "heads_sidecar_login"

# A deploy deletes and re-scores a head's predictions in one transaction (heads.deploy,
# heads.add_version). Under plain READ COMMITTED a BI query of heads.latest_predictions waits
# for that transaction, and lock escalation can take all of heads.predictions; with row
# versioning a reader sees the predictions as of its statement's start, the old ones until the
# commit, and never waits. Turning it on needs the database to itself (WITH ROLLBACK IMMEDIATE
# ends other sessions' open transactions), so it runs only while it is off: on a fresh stack,
# before anything else connects.
READ_COMMITTED_SNAPSHOT = """
DECLARE @database sysname = :database;
DECLARE @statement nvarchar(max);
IF EXISTS (
    SELECT 1
    FROM sys.databases AS d
    WHERE d.name = @database AND d.is_read_committed_snapshot_on = 0
)
BEGIN
    SET @statement = CONCAT(
        N'ALTER DATABASE ', QUOTENAME(@database),
        N' SET READ_COMMITTED_SNAPSHOT ON WITH ROLLBACK IMMEDIATE'
    );
    EXEC sys.sp_executesql @statement;
END;
"""

# The login and password are bound (@login, @password); SQL Server quotes them into the
# statement itself (CREATE LOGIN takes no parameter for a password).
CREATE_SIDECAR_LOGIN = """
DECLARE @login sysname = :login;
DECLARE @password nvarchar(max) = :password;
DECLARE @quote nchar(1) = NCHAR(39);
DECLARE @statement nvarchar(max) = CONCAT(
    IIF(SUSER_ID(@login) IS NULL, N'CREATE LOGIN ', N'ALTER LOGIN '), QUOTENAME(@login),
    N' WITH PASSWORD = N', @quote, REPLACE(@password, @quote, @quote + @quote), @quote
);
EXEC sys.sp_executesql @statement;
"""
CREATE_SIDECAR_USER = """
DECLARE @login sysname = :login;
DECLARE @statement nvarchar(max);
IF DATABASE_PRINCIPAL_ID(@login) IS NULL
BEGIN
    SET @statement = CONCAT(N'CREATE USER ', QUOTENAME(@login), N' FOR LOGIN ', QUOTENAME(@login));
    EXEC sys.sp_executesql @statement;
END;
IF IS_ROLEMEMBER(N'heads_sidecar', @login) = 0
BEGIN
    SET @statement = CONCAT(N'ALTER ROLE heads_sidecar ADD MEMBER ', QUOTENAME(@login));
    EXEC sys.sp_executesql @statement;
END;
"""


def create_sidecar_login(master: Engine, store: Store, password: str) -> None:
    """The sidecar's own least-privileged login (role heads_sidecar, sql/0005/roles/)."""
    with master.connect() as connection:
        connection.execute(
            text(CREATE_SIDECAR_LOGIN), {"login": SIDECAR_LOGIN, "password": password}
        )
    with store.engine.begin() as connection:
        connection.execute(text(CREATE_SIDECAR_USER), {"login": SIDECAR_LOGIN})


# The smoke script (the DBA's, too): it makes and drops what it uses (names sqlheads_smoke*).
SMOKE = Path(__file__).with_name("smoke.sql")


def run_smoke(store: Store) -> list:
    """docker/smoke.sql's batches on one connection (its temp tables live in the session); the
    rows of its last result, ``question`` and ``found``."""
    with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        cursor = connection.connection.cursor()
        rows: list = []
        for batch in sqlheads_sql.batches(SMOKE):
            cursor.execute(batch)
            while True:  # drain every result set, as an ODBC client must
                if cursor.description:
                    rows = cursor.fetchall()
                if not cursor.nextset():
                    break
        cursor.close()
    return rows


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
        print(
            f"database {database} at compatibility level", check_compatibility(connection, database)
        )
        connection.execute(text(READ_COMMITTED_SNAPSHOT), {"database": database})
        for batch in sqlheads_sql.batches(sqlheads_sql.ROOT / "setup.sql"):
            connection.exec_driver_sql(batch)
    store = Store.from_url(os.environ["SQLHEADS_MSSQL_URL"])
    print(host.init(store))
    encoder = host.register_encoder(store)
    print(f"default encoder {encoder.name} ({encoder.sha256[:12]}) registered")
    password = os.environ.get("SIDECAR_PASSWORD")
    if password:
        create_sidecar_login(master, store, password)
        print(f"sidecar login {SIDECAR_LOGIN} in role heads_sidecar")
    answers = run_smoke(store)
    for question, found in answers:
        print(f"smoke: {question}: {found}")
    problems = smoke_problems(answers)
    if problems:
        raise ServerSetupError("the deployment's smoke checks failed:\n- " + "\n- ".join(problems))
    print("smoke checks passed")


if __name__ == "__main__":
    try:
        main()
    except ServerSetupError as error:
        print(f"error {error.number}: {error.message}", file=sys.stderr)
        sys.exit(1)

"""Which SQL Server driver a URL needs, and a clear refusal where it cannot work.

``mssql+mssqlpython`` (Microsoft's mssql-python, which ships ODBC Driver 18) is a dialect of
SQLAlchemy 2.1 and later, and SQLAlchemy 2.1 needs Python 3.11; on Python 3.10 (SQL Server
2022's Machine Learning Services runtime) pip installs SQLAlchemy 2.0, where the dialect does
not exist and SQLAlchemy's own error ("Can't load plugin") says nothing about what to do.
"""

from __future__ import annotations

from sqlalchemy.dialects import registry
from sqlalchemy.exc import NoSuchModuleError

from sqlheads.errors import InvalidParameterError

PYODBC_URL = "mssql+pyodbc://USER:PASSWORD@HOST/DATABASE?driver=ODBC+Driver+18+for+SQL+Server"


def check_mssql_url(url: str) -> None:
    """Raise 50012, with the pyodbc URL to use instead, if ``url``'s dialect cannot load."""
    scheme = url.split("://", 1)[0]
    if not scheme.startswith("mssql"):
        return
    dialect = scheme.replace("+", ".") if "+" in scheme else "mssql"
    try:
        registry.load(dialect)
    except NoSuchModuleError:
        import sqlalchemy

        raise InvalidParameterError(
            f"this SQLAlchemy ({sqlalchemy.__version__}) has no {scheme} dialect "
            "(mssql+mssqlpython needs SQLAlchemy 2.1, which needs Python 3.11): on Python "
            f"3.10 use pyodbc with ODBC Driver 18, {PYODBC_URL}&TrustServerCertificate=yes"
        ) from None

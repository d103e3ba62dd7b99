-- sqlheads server setup: run ONCE per server, as a sysadmin, before the migrations.
-- (The migrations create the heads schema, its tables, views, procedures and roles; they
-- cannot do this part, because sp_configure ... RECONFIGURE is not allowed in a transaction.)

-- 1. Let SQL Server run Python through Machine Learning Services.
EXEC sys.sp_configure @configname = N'external scripts enabled', @configvalue = 1;
RECONFIGURE WITH OVERRIDE;
GO

-- 2. Check: value_in_use must be 1 (on Windows, restart the SQL Server service if it is not).
SELECT
    c.name,
    c.value_in_use
FROM sys.configurations AS c
WHERE c.name = N'external scripts enabled';
GO

-- 3. Check that Python answers, and which sqlheads it finds (it must be installed into the
--    runtime that mssql-conf's extensibility pythonbinpath names; see README).
EXEC sys.sp_execute_external_script
    @language = N'Python',
    @script = N'
import sqlheads
OutputDataSet = __import__("pandas").DataFrame({"sqlheads": [sqlheads.__version__]})
'
WITH RESULT SETS ((sqlheads_version nvarchar(32)));
GO

-- 4. After the migrations (alembic upgrade head), give people their roles, e.g.:
--    CREATE USER [CONTOSO\analysts] FROM LOGIN [CONTOSO\analysts];
--    ALTER ROLE heads_analyst ADD MEMBER [CONTOSO\analysts];
--    CREATE USER powerbi FROM LOGIN powerbi;   ALTER ROLE heads_reader ADD MEMBER powerbi;
--    CREATE USER sidecar FROM LOGIN sidecar;   ALTER ROLE heads_sidecar ADD MEMBER sidecar;

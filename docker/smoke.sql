-- sqlheads smoke script: answers, in one run, what only a real server can (issue 10), and prints
-- one table of what it found. Run it as a sysadmin in the sqlheads database after the
-- migrations and `register-encoder` (the compose stack's migrate service does both, then runs
-- it and exits 1 on what it finds wrong, with the fix: sqlheads.store.server_checks):
--   sqlcmd -C -S localhost -U sa -P "$MSSQL_SA_PASSWORD" -d sqlheads -i docker/smoke.sql
-- It creates a user without login, tables, sets and a head named sqlheads_smoke*, and drops
-- them. Section 6 waits up to two minutes for a sidecar, when one is connected.
SET NOCOUNT ON;
IF OBJECT_ID(N'tempdb..#smoke') IS NOT NULL DROP TABLE #smoke;
CREATE TABLE #smoke (
    id int IDENTITY (1, 1) PRIMARY KEY,
    question nvarchar(200) NOT NULL,
    found nvarchar(2000) NULL
);

-- 1. Versions: the server, and what the Python runtime finds (point 8).
INSERT INTO #smoke (question, found)
SELECT
    N'SQL Server',
    CONCAT(SERVERPROPERTY('ProductVersion'), N' ', SERVERPROPERTY('Edition'));
INSERT INTO #smoke (question, found)
SELECT
    N'external scripts enabled (value_in_use)',
    CONVERT(nvarchar(10), c.value_in_use)
FROM sys.configurations AS c
WHERE c.name = N'external scripts enabled';

-- 2. Inside Python: versions, the sandbox's user, the encoder cache folder's write (point 3),
--    and how NULL and int parameters arrive (point 4).
BEGIN TRY
    INSERT INTO #smoke (question, found)
    EXEC sys.sp_execute_external_script
        @language = N'Python',
        @script = N'
import os, sys
import pandas
rows = [("python", sys.version.split()[0] + " at " + sys.executable)]
try:
    import getpass
    rows.append(("sandbox user", getpass.getuser() + " uid " + str(os.getuid())))
except Exception as error:
    rows.append(("sandbox user", "unknown: " + repr(error)))
for name in ("sqlheads", "numpy", "pandas", "torch", "onnxruntime", "tokenizers", "sklearn",
             "revoscalepy"):
    try:
        rows.append((name, str(__import__(name).__version__)))
    except Exception as error:
        rows.append((name, "MISSING: " + repr(error)))
try:
    from sqlheads.sqlserver import server_cache_dir
    folder = server_cache_dir()
    os.makedirs(folder, exist_ok=True)
    probe = os.path.join(folder, ".smoke-" + str(os.getpid()))
    with open(probe, "w") as handle:
        handle.write("ok")
    os.remove(probe)
    rows.append(("cache folder " + folder, "writable"))
except Exception as error:
    rows.append(("cache folder", "NOT writable (sqlheads keeps encoders in memory): " + repr(error)))
for name, value in (("NULL int", null_int), ("NULL float", null_float), ("int 5", five)):
    rows.append(("parameter " + name + " arrives as", repr(value) + " (" + type(value).__name__ + ")"))
OutputDataSet = pandas.DataFrame(rows, columns=["question", "found"])
',
        @params = N'@null_int int, @null_float float, @five int',
        @null_int = NULL,
        @null_float = NULL,
        @five = 5;
END TRY
BEGIN CATCH
    INSERT INTO #smoke (question, found)
    VALUES (N'Python runs', CONCAT(N'FAILED: ', ERROR_NUMBER(), N' ', ERROR_MESSAGE()));
END CATCH;

-- 3. Typed result sets (point 7), in the shape the procedures use: a procedure that declares
--    WITH RESULT SETS, whose rows the caller takes with INSERT ... EXEC. Zero rows of an object
--    column, then b'' rows, as varbinary(max); int32 as int.
GO
CREATE PROCEDURE #smoke_typed
    @empty bit
AS
EXEC sys.sp_execute_external_script
    @language = N'Python',
    @script = N'
import pandas
rows = [] if empty else [b"", b"\x00\x01"]
OutputDataSet = pandas.DataFrame({
    "vector": pandas.Series(rows, dtype=object),
    "windows": pandas.Series([len(r) for r in rows], dtype="int32")})
',
    @params = N'@empty bit',
    @empty = @empty
WITH RESULT SETS ((vector varbinary(max), windows int));
GO
SET NOCOUNT ON;
CREATE TABLE #typed (vector varbinary(max) NULL, windows int NULL);
BEGIN TRY
    INSERT INTO #typed (vector, windows)
    EXEC #smoke_typed @empty = 1;
    INSERT INTO #smoke (question, found) VALUES (N'empty result set as varbinary, int', N'accepted');
END TRY
BEGIN CATCH
    INSERT INTO #smoke (question, found)
    VALUES (
        N'empty result set as varbinary, int',
        CONCAT(N'REFUSED: ', ERROR_NUMBER(), N' ', ERROR_MESSAGE())
    );
END CATCH;
BEGIN TRY
    INSERT INTO #typed (vector, windows)
    EXEC #smoke_typed @empty = 0;
    INSERT INTO #smoke (question, found)
    SELECT
        N'bytes rows as varbinary, int32 as int',
        CONCAT(N'accepted: lengths ', STRING_AGG(CONVERT(nvarchar(10), DATALENGTH(t.vector)), N','))
    FROM #typed AS t;
END TRY
BEGIN CATCH
    INSERT INTO #smoke (question, found)
    VALUES (
        N'bytes rows as varbinary, int32 as int',
        CONCAT(N'REFUSED: ', ERROR_NUMBER(), N' ', ERROR_MESSAGE())
    );
END CATCH;

-- 4. Module signing and grants (point 17), the settings and the lock names (points 10, 20).
INSERT INTO #smoke (question, found)
SELECT
    CONCAT(N'signed module ', OBJECT_SCHEMA_NAME(cp.major_id), N'.', OBJECT_NAME(cp.major_id)),
    c.name
FROM sys.crypt_properties AS cp
INNER JOIN sys.certificates AS c ON cp.thumbprint = c.thumbprint
WHERE cp.class = 1;
INSERT INTO #smoke (question, found)
SELECT
    CONCAT(N'database permission of ', pr.name),
    p.permission_name
FROM sys.database_permissions AS p
INNER JOIN sys.database_principals AS pr ON p.grantee_principal_id = pr.principal_id
WHERE p.permission_name = N'EXECUTE ANY EXTERNAL SCRIPT';
INSERT INTO #smoke (question, found)
SELECT
    N'certificate private key',
    COALESCE(c.pvt_key_encryption_type_desc, N'none')
FROM sys.certificates AS c
WHERE c.name = N'heads_external_script';
INSERT INTO #smoke (question, found)
SELECT
    CONCAT(N'setting ', s.name),
    CONCAT(s.default_value, N' [', s.choices, N'] ', s.minimum, N'..', s.maximum)
FROM heads.settings AS s;
INSERT INTO #smoke (question, found)
VALUES (N'lock resource of set Reviews', heads.lock_resource(N'set', N'Reviews'));
-- The database (revision 0008): its compatibility level (sqlheads needs 160: finding 7 of the
-- fourth audit), row versioning for readers, and the claim's READPAST beside it (finding 6),
-- run with a kind no job has, so that it claims nothing.
INSERT INTO #smoke (question, found)
SELECT
    N'database compatibility level, READ_COMMITTED_SNAPSHOT',
    CONCAT(
        d.compatibility_level, N', ', IIF(d.is_read_committed_snapshot_on = 1, N'on', N'off'),
        IIF(d.compatibility_level < 160, N' (FAILED: sqlheads needs level 160)', N'')
    )
FROM sys.databases AS d
WHERE d.name = DB_NAME();
BEGIN TRY
    DECLARE @smoke_claimed int;
    EXEC heads.claim_job
        @worker = N'sqlheads_smoke', @kinds = N'sqlheads_smoke_none', @job_id = @smoke_claimed OUTPUT;
    INSERT INTO #smoke (question, found)
    VALUES (N'claim with UPDLOCK, READPAST, READCOMMITTEDLOCK', N'accepted');
END TRY
BEGIN CATCH
    INSERT INTO #smoke (question, found)
    VALUES (
        N'claim with UPDLOCK, READPAST, READCOMMITTEDLOCK',
        CONCAT(N'FAILED: ', ERROR_NUMBER(), N' ', ERROR_MESSAGE())
    );
END CATCH;

-- 5. The analyst's door, as a user that is only in heads_analyst: a verb that runs Python works
--    (signing), Python of one's own does not (least privilege).
-- A set an earlier, interrupted run left belongs to that run's user (a user without login is
-- another SID each time it is made, revision 0008): it goes first.
IF EXISTS (SELECT 1 FROM heads.embedding_sets AS s WHERE s.name = N'sqlheads_smoke')
    EXEC heads.drop_set @set = N'sqlheads_smoke', @progress = 0;
IF DATABASE_PRINCIPAL_ID(N'sqlheads_smoke_analyst') IS NULL
    CREATE USER sqlheads_smoke_analyst WITHOUT LOGIN;
ALTER ROLE heads_analyst ADD MEMBER sqlheads_smoke_analyst;
IF OBJECT_ID(N'dbo.sqlheads_smoke_rows') IS NULL
    CREATE TABLE dbo.sqlheads_smoke_rows (item_key int PRIMARY KEY, body nvarchar(200) NULL);
DELETE FROM dbo.sqlheads_smoke_rows;
INSERT INTO dbo.sqlheads_smoke_rows (item_key, body)
VALUES (1, N'a moving, funny film'), (2, N'dull and far too long'), (3, NULL);
GRANT SELECT ON OBJECT::dbo.sqlheads_smoke_rows TO sqlheads_smoke_analyst;
-- EXECUTE AS runs inside sp_executesql: the impersonation ends with that batch, error or not.
BEGIN TRY
    EXEC sys.sp_executesql N'
        EXECUTE AS USER = N''sqlheads_smoke_analyst'';
        EXEC heads.embed
            @set = N''sqlheads_smoke'',
            @source = N''SELECT item_key, body AS text FROM dbo.sqlheads_smoke_rows'',
            @long_text = ''WINDOW'',
            @progress = 0;
        REVERT;';
    INSERT INTO #smoke (question, found)
    SELECT
        N'heads.embed as a heads_analyst (signed Python)',
        CONCAT(N'ran: ', COUNT(*), N' vectors, long_text ', MIN(s.long_text))
    FROM heads.embeddings AS e
    INNER JOIN heads.embedding_sets AS s ON e.set_id = s.set_id
    WHERE s.name = N'sqlheads_smoke';
END TRY
BEGIN CATCH
    INSERT INTO #smoke (question, found)
    VALUES (
        N'heads.embed as a heads_analyst (signed Python)',
        CONCAT(N'FAILED: ', ERROR_NUMBER(), N' ', ERROR_MESSAGE())
    );
END CATCH;
BEGIN TRY
    EXEC sys.sp_executesql N'
        EXECUTE AS USER = N''sqlheads_smoke_analyst'';
        EXEC sys.sp_execute_external_script @language = N''Python'', @script = N''x = 1'';
        REVERT;';
    INSERT INTO #smoke (question, found)
    VALUES (N'own Python as a heads_analyst', N'ALLOWED: analysts can run any Python (not least privilege)');
END TRY
BEGIN CATCH
    INSERT INTO #smoke (question, found)
    VALUES (N'own Python as a heads_analyst', CONCAT(N'refused, as it should be: ', ERROR_NUMBER()));
END CATCH;

-- 6. Request -> sidecar -> predict as the analyst (issue 19). The request captures the rows
--    with the analyst's permissions; the analyst's table is dropped at once, and the sidecar
--    (compose profile `sidecar`) still embeds them: it runs no caller's query. Only when a
--    login in heads_sidecar is connected (else reported as skipped at once, as when the
--    compose stack's migrate service runs this before any sidecar starts); a sidecar that
--    does not claim the job in two minutes is reported as skipped too.
IF OBJECT_ID(N'dbo.sqlheads_smoke_sidecar_rows') IS NULL
    CREATE TABLE dbo.sqlheads_smoke_sidecar_rows (
        item_key int PRIMARY KEY, body nvarchar(200) NOT NULL, quality nvarchar(20) NOT NULL
    );
DELETE FROM dbo.sqlheads_smoke_sidecar_rows;
INSERT INTO dbo.sqlheads_smoke_sidecar_rows (item_key, body, quality)
SELECT
    n.number,
    IIF(n.number % 2 = 0, N'a moving, funny and wise film', N'dull, slow and far too long'),
    IIF(n.number % 2 = 0, N'good', N'bad')
FROM (
    SELECT TOP (40) ROW_NUMBER() OVER (ORDER BY o.object_id) AS number FROM sys.all_objects AS o
) AS n;
GRANT SELECT ON OBJECT::dbo.sqlheads_smoke_sidecar_rows TO sqlheads_smoke_analyst;
DECLARE @smoke_job int;
DECLARE @smoke_state varchar(16);
DECLARE @smoke_waited int = 0;
DECLARE @smoke_sidecars int = (
    SELECT COUNT(*)
    FROM sys.dm_exec_sessions AS es
    INNER JOIN sys.database_principals AS dp ON es.security_id = dp.sid
    WHERE es.database_id = DB_ID() AND IS_ROLEMEMBER(N'heads_sidecar', dp.name) = 1
);
IF @smoke_sidecars = 0
    INSERT INTO #smoke (question, found)
    VALUES (
        N'request -> sidecar -> predict as a heads_analyst',
        N'skipped: no login in heads_sidecar is connected (compose profile sidecar)'
    );
ELSE
BEGIN
IF EXISTS (SELECT 1 FROM heads.models AS m WHERE m.head = N'sqlheads_smoke_head')
    EXEC heads.drop_head @head = N'sqlheads_smoke_head';
IF EXISTS (SELECT 1 FROM heads.embedding_sets AS s WHERE s.name = N'sqlheads_smoke_sidecar')
    EXEC heads.drop_set @set = N'sqlheads_smoke_sidecar', @progress = 0;
BEGIN TRY
    -- Called plainly, not through INSERT ... EXEC: that would run the request inside the
    -- INSERT's transaction, which heads.assert_no_transaction refuses (50017). The job is read
    -- back from the queue instead of from the procedure's result row.
    EXEC sys.sp_executesql N'
        EXECUTE AS USER = N''sqlheads_smoke_analyst'';
        EXEC heads.request_embed
            @set = N''sqlheads_smoke_sidecar'',
            @source = N''SELECT item_key, body AS text FROM dbo.sqlheads_smoke_sidecar_rows'';
        REVERT;';
    SELECT @smoke_job = MAX(q.job_id)
    FROM heads.job_queue AS q
    WHERE q.set_name = N'sqlheads_smoke_sidecar' AND q.requested_user = N'sqlheads_smoke_analyst';
    DROP TABLE dbo.sqlheads_smoke_sidecar_rows;  -- the caller's table is gone; the job is not
    WHILE @smoke_waited < 120
    BEGIN
        SELECT @smoke_state = q.state FROM heads.job_queue AS q WHERE q.job_id = @smoke_job;
        IF @smoke_state IN ('done', 'failed', 'cancelled') BREAK;
        WAITFOR DELAY '00:00:02';
        SET @smoke_waited += 2;
    END;
    IF @smoke_state = 'queued'
    BEGIN
        INSERT INTO #smoke (question, found)
        VALUES (
            N'request -> sidecar -> predict as a heads_analyst',
            N'skipped: no sidecar claimed the job in 120 s (compose profile sidecar)'
        );
        EXEC heads.cancel_job @job_id = @smoke_job;
    END;
    ELSE IF @smoke_state <> 'done'
        INSERT INTO #smoke (question, found)
        SELECT
            N'request -> sidecar -> predict as a heads_analyst',
            CONCAT(N'FAILED: the job is ', q.state, N': ', q.error_number, N' ', q.error)
        FROM heads.job_queue AS q
        WHERE q.job_id = @smoke_job;
    ELSE
    BEGIN
        -- Labels from a query that needs no table (the analyst's table is gone).
        EXEC sys.sp_executesql N'
            EXECUTE AS USER = N''sqlheads_smoke_analyst'';
            EXEC heads.train
                @head = N''sqlheads_smoke_head'',
                @set = N''sqlheads_smoke_sidecar'',
                @labels = N''SELECT n.k AS item_key, IIF(n.k % 2 = 0, N''''good'''', N''''bad'''')
                    AS label FROM (SELECT TOP (40) ROW_NUMBER() OVER (ORDER BY o.object_id) AS k
                    FROM sys.all_objects AS o) AS n'',
                @deploy = ''always'';
            EXEC heads.predict
                @head = N''sqlheads_smoke_head'', @set = N''sqlheads_smoke_sidecar'', @progress = 0;
            REVERT;';
        INSERT INTO #smoke (question, found)
        SELECT
            N'request -> sidecar -> predict as a heads_analyst',
            CONCAT(N'ran: ', COUNT(*), N' predictions of rows the sidecar embedded')
        FROM heads.latest_predictions AS p
        WHERE p.head = N'sqlheads_smoke_head';
    END;
END TRY
BEGIN CATCH
    INSERT INTO #smoke (question, found)
    VALUES (
        N'request -> sidecar -> predict as a heads_analyst',
        CONCAT(N'FAILED: ', ERROR_NUMBER(), N' ', ERROR_MESSAGE())
    );
END CATCH;
END;

-- Clean up, then the answers.
IF EXISTS (SELECT 1 FROM heads.models AS m WHERE m.head = N'sqlheads_smoke_head')
    EXEC heads.drop_head @head = N'sqlheads_smoke_head';
IF EXISTS (SELECT 1 FROM heads.embedding_sets AS s WHERE s.name = N'sqlheads_smoke_sidecar')
    EXEC heads.drop_set @set = N'sqlheads_smoke_sidecar', @progress = 0;
DROP TABLE IF EXISTS dbo.sqlheads_smoke_sidecar_rows;
IF EXISTS (SELECT 1 FROM heads.embedding_sets AS s WHERE s.name = N'sqlheads_smoke')
    EXEC heads.drop_set @set = N'sqlheads_smoke', @progress = 0;
DROP TABLE dbo.sqlheads_smoke_rows;
DROP USER sqlheads_smoke_analyst;
SELECT
    s.question,
    s.found
FROM #smoke AS s
ORDER BY s.id;
GO

-- heads.embed: embed the rows of a caller's query into an embedding set, incrementally.
--
-- @source must return item_key and text. It runs once, with the caller's own permissions
-- (heads.stage_query), into a tempdb staging table; the rows are then sent to Python in batches
-- of @batch_rows by item_key range, each batch committed on its own, so that memory stays flat
-- however large the table and a failure loses at most the batch in flight. Rows whose text is
-- unchanged since the last run (same UTF-8 sha256) never leave SQL Server. Defaults and bounds
-- come from heads.settings (Python's). Rows whose item_key is NULL or empty are one reject,
-- under the empty key (heads.rejects.item_key is NOT NULL), as in sqlheads.procedures.embed.
-- @progress = 1 sends a line to the Messages tab after every batch (SSMS); programs pass 0
-- and read the one result row. Locks: embed:<set> Exclusive (no wait) and set:<set> Shared,
-- Session-owned, released on every exit. The set records @source and its author (USER_NAME())
-- once the run succeeds: that query later runs for its author alone (revision 0007).
-- Revision 0008: a set belongs to the user who made it (USER_SID()), and only its owner, or a
-- member of heads_admin or db_owner, embeds into it (heads.assert_set_owner, 50074; a set made
-- before 0008 whose owner is not known is taken by the caller); the author of the source query
-- is recorded by USER_SID() too (heads.set_source compares it).
-- Errors: 50001, 50002, 50003, 50007, 50008, 50009, 50012, 50014, 50016, 50017, 50074 (see
-- README).
CREATE OR ALTER PROCEDURE heads.embed
    @set nvarchar(128),
    @source nvarchar(max),
    @encoder nvarchar(128) = NULL,
    @long_text varchar(16) = NULL,
    @batch_rows int = NULL,
    @batch_size int = NULL,
    @threads int = NULL,
    @lock_timeout_ms int = NULL,
    @progress bit = 1
AS
BEGIN
    SET NOCOUNT ON;
    SET IMPLICIT_TRANSACTIONS OFF;
    EXEC heads.assert_no_transaction @procedure = N'heads.embed';
    SET XACT_ABORT ON;
    DECLARE @started datetime2(3) = SYSUTCDATETIME();
    DECLARE @message nvarchar(2048);
    DECLARE @set_id int;
    DECLARE @encoder_id int;
    DECLARE @set_long_text varchar(16);
    DECLARE @wanted_long_text nvarchar(400) = @long_text;
    DECLARE @encoder_name nvarchar(400);
    DECLARE @encoder_sha256 char(64);
    DECLARE @dim int;
    DECLARE @max_length int;
    DECLARE @encoder_onnx varbinary(max);
    DECLARE @tokenizer_json nvarchar(max);
    DECLARE @error_number int;
    DECLARE @error_message nvarchar(2048);
    DECLARE @locked bit = 0;
    DECLARE @created_set bit = 0;
    DECLARE @total bigint;
    DECLARE @lower nvarchar(450);
    DECLARE @upper nvarchar(450);
    DECLARE @batch_read bigint;
    DECLARE @batch_duplicates bigint;
    DECLARE @batch_output bigint;
    DECLARE @attempt int;
    DECLARE @rows_read bigint = 0;
    DECLARE @embedded bigint = 0;
    DECLARE @unchanged bigint = 0;
    DECLARE @rejected bigint = 0;
    DECLARE @windowed bigint = 0;
    DECLARE @keyless bigint;
    DECLARE @keyless_reason nvarchar(400);
    DECLARE @me varbinary(85) = USER_SID();
    DECLARE @my_name nvarchar(128) = USER_NAME();
    DECLARE @is_admin bit = IIF(
        COALESCE(IS_MEMBER(N'heads_admin'), 0) = 1 OR COALESCE(IS_MEMBER(N'db_owner'), 0) = 1, 1, 0
    );
    BEGIN TRY
        EXEC heads.assert_name @kind = N'set', @name = @set;
        IF @encoder IS NOT NULL EXEC heads.assert_name @kind = N'encoder', @name = @encoder;
        IF @wanted_long_text IS NOT NULL
            EXEC heads.setting @name = N'long_text', @value = @wanted_long_text OUTPUT;
        EXEC heads.setting_int @name = N'embed.batch_rows', @value = @batch_rows OUTPUT;
        EXEC heads.setting_int @name = N'embed.batch_size', @value = @batch_size OUTPUT;
        EXEC heads.setting_int @name = N'lock_timeout_ms', @value = @lock_timeout_ms OUTPUT;

        -- One embedding run per set at a time (two would send the same rows twice), and no
        -- drop_set underneath it.
        SET @locked = 1;
        EXEC heads.take_lock
            @kind = N'embed', @name = @set, @mode = N'Exclusive', @owner = N'Session',
            @timeout_ms = 0;
        EXEC heads.take_lock
            @kind = N'set', @name = @set, @mode = N'Shared', @owner = N'Session',
            @timeout_ms = @lock_timeout_ms;

        SELECT
            @set_id = es.set_id,
            @encoder_id = es.encoder_id,
            @set_long_text = es.long_text
        FROM heads.embedding_sets AS es
        WHERE es.name = @set;
        IF @set_id IS NULL
        BEGIN
            SET @encoder_name = @encoder;
            EXEC heads.setting @name = N'encoder', @value = @encoder_name OUTPUT;
            SELECT @encoder_id = enc.encoder_id FROM heads.encoders AS enc WHERE enc.name = @encoder_name;
            IF @encoder_id IS NULL
            BEGIN
                SET @message = CONCAT(
                    N'encoder ''', @encoder_name, N''' is not registered: register it with ',
                    N'`sqlheads --url mssql+pyodbc://... register-encoder --name ', @encoder_name,
                    N'` (the compose stack''s migrate service registers the default encoder)'
                );
                THROW 50001, @message, 1;
            END;
            EXEC heads.setting @name = N'long_text', @value = @wanted_long_text OUTPUT;
            SET @set_long_text = @wanted_long_text;
        END;
        ELSE
        BEGIN
            EXEC heads.assert_set_owner
                @set_id = @set_id, @owner_sid = @me, @owner_user = @my_name, @is_admin = @is_admin;
            SELECT @encoder_name = enc.name FROM heads.encoders AS enc WHERE enc.encoder_id = @encoder_id;
            IF @encoder IS NOT NULL AND @encoder <> @encoder_name
            BEGIN
                SET @message = CONCAT(
                    N'set ''', @set, N''' is embedded with encoder ''', @encoder_name,
                    N''', not ''', @encoder, N''': vectors of two encoders cannot share a set; ',
                    N'embed into a new set name'
                );
                THROW 50007, @message, 1;
            END;
            IF @wanted_long_text IS NOT NULL AND @wanted_long_text <> @set_long_text
            BEGIN
                SET @message = CONCAT(
                    N'set ''', @set, N''' embeds long texts with ''', @set_long_text,
                    N''', not ''', @wanted_long_text, N''': use a new set name, or drop the set first'
                );
                THROW 50012, @message, 1;
            END;
        END;

        SELECT
            @encoder_sha256 = enc.sha256,
            @dim = enc.dim,
            @max_length = enc.max_length
        FROM heads.encoders AS enc
        WHERE enc.encoder_id = @encoder_id;

        -- Stage the caller's rows (caller's permissions), keyed for range batches.
        CREATE TABLE #embed_source (
            item_key nvarchar(450) COLLATE DATABASE_DEFAULT NULL,
            text nvarchar(max) COLLATE DATABASE_DEFAULT NULL,
            text_sha256 char(64) COLLATE DATABASE_DEFAULT NULL,
            duplicate bit NOT NULL DEFAULT 0
        );
        EXEC heads.stage_query
            @what = N'source', @query = @source, @columns = N'item_key,text', @into = N'#embed_source';
        SELECT @total = COUNT_BIG(*) FROM #embed_source;
        SELECT
            @keyless = COUNT_BIG(*),
            @keyless_reason = CASE
                WHEN COUNT(*) > COUNT(s.item_key) THEN N'item_key is NULL' ELSE N'item_key is empty'
            END
        FROM #embed_source AS s
        WHERE s.item_key IS NULL OR s.item_key = N'';
        DELETE s FROM #embed_source AS s
        WHERE s.item_key IS NULL OR s.item_key = N'';
        CREATE CLUSTERED INDEX ix_embed_source ON #embed_source (item_key);
        -- The set is created only once its source has been read: a refused call leaves none.
        IF @set_id IS NULL
        BEGIN
            INSERT INTO heads.embedding_sets (name, encoder_id, long_text, owner_sid, owner_user)
            VALUES (@set, @encoder_id, @set_long_text, @me, @my_name);
            SET @set_id = SCOPE_IDENTITY();
            SET @created_set = 1;
        END;
        IF @keyless > 0
        BEGIN
            BEGIN TRANSACTION;
            DELETE e FROM heads.embeddings AS e WHERE e.set_id = @set_id AND e.item_key = N'';
            DELETE r FROM heads.rejects AS r WHERE r.set_id = @set_id AND r.item_key = N'';
            INSERT INTO heads.rejects (set_id, item_key, reason) VALUES (@set_id, N'', @keyless_reason);
            COMMIT TRANSACTION;
            SET @rows_read = @keyless;
            SET @rejected = @keyless;
        END;
        -- The same sha256 as Python's (UTF-8 bytes): unchanged rows are skipped here.
        UPDATE #embed_source
        SET text_sha256 = LOWER(CONVERT(char(64), HASHBYTES(
            'SHA2_256', CONVERT(varbinary(max), CONVERT(varchar(max), text COLLATE Latin1_General_100_BIN2_UTF8))
        ), 2))
        WHERE text IS NOT NULL;
        -- A key given more than once is rejected whole, every copy, on every run (as in
        -- sqlheads.procedures.embed): SQL has no "first" copy, and keeping one would flip.
        WITH counted AS (
            SELECT
                s.duplicate,
                COUNT(*) OVER (PARTITION BY s.item_key) AS copies
            FROM #embed_source AS s
        )
        UPDATE counted SET duplicate = 1
        WHERE copies > 1;

        CREATE TABLE #embed_batch (
            item_key nvarchar(450) COLLATE DATABASE_DEFAULT NOT NULL PRIMARY KEY,
            text nvarchar(max) COLLATE DATABASE_DEFAULT NULL,
            stored_sha256 char(64) COLLATE DATABASE_DEFAULT NULL
        );
        CREATE TABLE #embed_output (
            item_key nvarchar(450) COLLATE DATABASE_DEFAULT NOT NULL,
            text_sha256 char(64) COLLATE DATABASE_DEFAULT NULL,
            vector varbinary(max) NULL,
            windows int NULL,
            reject_reason nvarchar(400) COLLATE DATABASE_DEFAULT NULL
        );
        WHILE 1 = 1
        BEGIN
            SET @upper = NULL;
            SELECT @upper = MAX(b.item_key)
            FROM (
                SELECT TOP (@batch_rows) s.item_key
                FROM #embed_source AS s
                WHERE @lower IS NULL OR s.item_key > @lower
                ORDER BY s.item_key
            ) AS b
            OPTION (RECOMPILE);
            IF @upper IS NULL BREAK;
            TRUNCATE TABLE #embed_batch;
            SELECT
                @batch_read = COUNT_BIG(*),
                @batch_duplicates = COALESCE(SUM(CAST(s.duplicate AS bigint)), 0)
            FROM #embed_source AS s
            WHERE (@lower IS NULL OR s.item_key > @lower) AND s.item_key <= @upper
            OPTION (RECOMPILE);
            INSERT INTO #embed_batch (item_key, text, stored_sha256)
            SELECT
                s.item_key,
                s.text,
                e.text_sha256
            FROM #embed_source AS s
            LEFT OUTER JOIN heads.embeddings AS e
                ON e.set_id = @set_id AND s.item_key = e.item_key
            WHERE
                (@lower IS NULL OR s.item_key > @lower)
                AND s.item_key <= @upper
                AND s.duplicate = 0
                AND (e.text_sha256 IS NULL OR s.text_sha256 IS NULL OR e.text_sha256 <> s.text_sha256)
            OPTION (RECOMPILE);

            TRUNCATE TABLE #embed_output;
            IF EXISTS (SELECT 1 FROM #embed_batch)
            BEGIN
                SET @attempt = 0;
                WHILE 1 = 1
                BEGIN
                    SET @attempt = @attempt + 1;
                    SET @error_number = 0;
                    TRUNCATE TABLE #embed_output;
                    INSERT INTO #embed_output (item_key, text_sha256, vector, windows, reject_reason)
                    EXEC heads.embed_batch
                        @encoder_sha256 = @encoder_sha256,
                        @long_text = @set_long_text,
                        @batch_size = @batch_size,
                        @threads = @threads,
                        @encoder_onnx = @encoder_onnx,
                        @tokenizer_json = @tokenizer_json,
                        @dim = @dim,
                        @max_length = @max_length,
                        @error_number = @error_number OUTPUT,
                        @error_message = @error_message OUTPUT;
                    -- 50009: the server's cache lacks the encoder. Send its bytes, once.
                    IF @error_number = 50009 AND @attempt = 1
                    BEGIN
                        EXEC heads.report_progress
                            @progress = @progress, @what = N'heads.embed',
                            @note = N'encoder not cached on this server yet: sending its bytes once';
                        SELECT
                            @encoder_onnx = enc.onnx,
                            @tokenizer_json = enc.tokenizer_json
                        FROM heads.encoders AS enc
                        WHERE enc.encoder_id = @encoder_id;
                        CONTINUE;
                    END;
                    BREAK;
                END;
                SET @encoder_onnx = NULL;
                SET @tokenizer_json = NULL;
                IF COALESCE(@error_number, 0) <> 0 THROW @error_number, @error_message, 1;
            END;
            SELECT @batch_output = COUNT_BIG(*) FROM #embed_output;

            BEGIN TRANSACTION;
            INSERT INTO #embed_output (item_key, reject_reason)
            SELECT DISTINCT
                s.item_key,
                N'duplicate item_key in the source query'
            FROM #embed_source AS s
            WHERE
                s.duplicate = 1
                AND (@lower IS NULL OR s.item_key > @lower)
                AND s.item_key <= @upper
            OPTION (RECOMPILE);
            -- A re-embedded or rejected key's old vector is stale: its text changed, is gone,
            -- or is no longer one text.
            DELETE e
            FROM heads.embeddings AS e
            INNER JOIN #embed_output AS o ON e.item_key = o.item_key
            WHERE e.set_id = @set_id;
            DELETE r
            FROM heads.rejects AS r
            WHERE
                r.set_id = @set_id
                AND r.item_key IN (SELECT o.item_key FROM #embed_output AS o);
            INSERT INTO heads.embeddings (set_id, item_key, text_sha256, vector, windows)
            SELECT
                @set_id,
                o.item_key,
                o.text_sha256,
                o.vector,
                o.windows
            FROM #embed_output AS o
            WHERE o.reject_reason IS NULL;
            INSERT INTO heads.rejects (set_id, item_key, reason)
            SELECT
                @set_id,
                o.item_key,
                MIN(o.reject_reason)
            FROM #embed_output AS o
            WHERE o.reject_reason IS NOT NULL
            GROUP BY o.item_key;
            COMMIT TRANSACTION;

            SET @rows_read = @rows_read + @batch_read;
            SET @unchanged = @unchanged + @batch_read - @batch_output - @batch_duplicates;
            SELECT
                @embedded = @embedded + COALESCE(SUM(CASE WHEN o.reject_reason IS NULL THEN 1 ELSE 0 END), 0),
                @windowed = @windowed + COALESCE(SUM(CASE WHEN o.windows > 1 THEN 1 ELSE 0 END), 0)
            FROM #embed_output AS o;
            SET @rejected = @rejected + @batch_output + @batch_duplicates
                - (SELECT COUNT_BIG(*) FROM #embed_output AS o WHERE o.reject_reason IS NULL);
            EXEC heads.report_progress
                @progress = @progress, @what = N'heads.embed', @done = @rows_read, @total = @total,
                @started = @started;
            SET @lower = @upper;
        END;

        -- The source text models (word students) read the rows' text through, when a call
        -- names none of its own, and its author: it runs for that database user alone
        -- (heads.set_source).
        UPDATE source_set
        SET
            source_set.source_query = @source,
            source_set.source_user = @my_name,
            source_set.source_sid = @me
        FROM heads.embedding_sets AS source_set
        WHERE source_set.set_id = @set_id;
        EXEC heads.release_lock @kind = N'set', @name = @set;
        EXEC heads.release_lock @kind = N'embed', @name = @set;
        SET @locked = 0;
        SELECT
            @set AS [set],
            @encoder_name AS encoder,
            @set_long_text AS long_text,
            @rows_read AS rows_read,
            @embedded AS embedded,
            @unchanged AS unchanged,
            @rejected AS rejected,
            @windowed AS windowed,
            (SELECT COUNT_BIG(*) FROM heads.embeddings AS e WHERE e.set_id = @set_id) AS set_embedded,
            (SELECT COUNT_BIG(*) FROM heads.rejects AS r WHERE r.set_id = @set_id) AS set_rejected,
            DATEDIFF_BIG(MILLISECOND, @started, SYSUTCDATETIME()) / 1000.0 AS seconds;
    END TRY
    BEGIN CATCH
        IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;
        -- A set this call created and could not fill (its first batch failed) is removed.
        IF @created_set = 1
            DELETE es FROM heads.embedding_sets AS es
            WHERE
                es.set_id = @set_id
                AND NOT EXISTS (SELECT 1 FROM heads.embeddings AS e WHERE e.set_id = @set_id)
                AND NOT EXISTS (SELECT 1 FROM heads.rejects AS r WHERE r.set_id = @set_id);
        IF @locked = 1
        BEGIN
            EXEC heads.release_lock @kind = N'set', @name = @set;
            EXEC heads.release_lock @kind = N'embed', @name = @set;
        END;
        THROW;
    END CATCH;
END;
GO

-- heads.request_embed: queue the embedding of a caller's query for the GPU sidecars, split
-- into @parts jobs by key range (one per sidecar), as `sqlheads request-embed` does.
--
-- @source must return item_key and text. It runs once here, with the caller's own
-- permissions (heads.stage_query); the sorted distinct keys are cut at their quantiles. Keys
-- compare by code point (a BIN2 collation), as the sidecar compares them in Python, so every
-- row falls in exactly one part. Each part's rows are captured into heads.job_inputs with its
-- job, in one transaction: the sidecar embeds those rows and never runs @source, which it
-- only records as the set's source query (revision 0006, issue 19). The jobs record who
-- asked: ORIGINAL_LOGIN() and the database user. The parameters are
-- JSON built by FOR JSON; defaults and bounds come from heads.settings (Python's).
-- Revision 0008: the jobs record the requester's USER_SID() too (heads.jobs and
-- heads.cancel_job compare it, never the name), and a request into another user's existing set
-- is refused (heads.assert_set_owner, 50074) unless the caller is in heads_admin or db_owner;
-- the sidecar's job then writes only into a set of its requester (heads.job_set).
-- Result: set, group_id, first_job_id, parts, rows, encoder, engine.
-- Errors: 50001, 50002, 50003, 50007, 50012, 50014, 50017, 50074 (see README).
CREATE OR ALTER PROCEDURE heads.request_embed
    @set nvarchar(128),
    @source nvarchar(max),
    @encoder nvarchar(128) = NULL,
    @long_text varchar(16) = NULL,
    @parts int = NULL,
    @engine varchar(16) = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SET IMPLICIT_TRANSACTIONS OFF;
    EXEC heads.assert_no_transaction @procedure = N'heads.request_embed';
    SET XACT_ABORT ON;
    DECLARE @message nvarchar(2048);
    DECLARE @wanted_long_text nvarchar(400) = @long_text;
    DECLARE @wanted_engine nvarchar(400) = @engine;
    DECLARE @encoder_name nvarchar(400);
    DECLARE @set_long_text varchar(16);
    DECLARE @set_id int;
    DECLARE @max_attempts int;
    DECLARE @rows bigint;
    DECLARE @keys bigint;
    DECLARE @cut int = 1;
    DECLARE @group_id int;
    DECLARE @parameters nvarchar(max);
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
        EXEC heads.setting @name = N'embed.engine', @value = @wanted_engine OUTPUT;
        EXEC heads.setting_int @name = N'embed.parts', @value = @parts OUTPUT;
        EXEC heads.setting_int @name = N'jobs.max_attempts', @value = @max_attempts OUTPUT;

        -- The set's encoder and long-text mode, as heads.embed checks them.
        SELECT
            @set_id = es.set_id,
            @encoder_name = enc.name,
            @set_long_text = es.long_text
        FROM heads.embedding_sets AS es
        INNER JOIN heads.encoders AS enc ON es.encoder_id = enc.encoder_id
        WHERE es.name = @set;
        IF @set_id IS NULL
        BEGIN
            SET @encoder_name = @encoder;
            EXEC heads.setting @name = N'encoder', @value = @encoder_name OUTPUT;
            IF NOT EXISTS (SELECT 1 FROM heads.encoders AS enc WHERE enc.name = @encoder_name)
            BEGIN
                SET @message = CONCAT(
                    N'encoder ''', @encoder_name, N''' is not registered: register it with ',
                    N'`sqlheads --url mssql+pyodbc://... register-encoder --name ', @encoder_name,
                    N'` (the compose stack''s migrate service registers the default encoder)'
                );
                THROW 50001, @message, 1;
            END;
        END;
        ELSE
        BEGIN
            EXEC heads.assert_set_owner
                @set_id = @set_id, @owner_sid = @me, @owner_user = @my_name, @is_admin = @is_admin;
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

        -- The source's rows (caller's permissions); keys in code-point order.
        CREATE TABLE #request_keys (
            item_key nvarchar(450) COLLATE Latin1_General_100_BIN2 NULL,
            text nvarchar(max) COLLATE DATABASE_DEFAULT NULL
        );
        EXEC heads.stage_query
            @what = N'source', @query = @source, @columns = N'item_key,text',
            @into = N'#request_keys';
        IF EXISTS (SELECT 1 FROM #request_keys AS k WHERE k.item_key IS NULL)
            THROW 50003,
                N'the source query returned rows with a NULL item_key: filter them out (WHERE key IS NOT NULL)',
                1;
        CREATE TABLE #request_numbered (
            item_key nvarchar(450) COLLATE Latin1_General_100_BIN2 NOT NULL,
            position bigint NOT NULL
        );
        INSERT INTO #request_numbered (item_key, position)
        SELECT
            k.item_key,
            ROW_NUMBER() OVER (ORDER BY k.item_key) - 1
        FROM #request_keys AS k
        GROUP BY k.item_key;
        SET @keys = ROWCOUNT_BIG();
        SELECT @rows = COUNT_BIG(*) FROM #request_keys;
        -- Fewer distinct keys than parts give fewer parts (sqlheads.store.jobs.split_keys).
        IF @keys < @parts SET @parts = IIF(@keys = 0, 1, CAST(@keys AS int));
        -- Part p starts at the key at position floor((p - 1) * keys / parts); part 1 at the first.
        -- In bigint: the product overflows int from about 34M keys (revision 0006), and the
        -- counts themselves past 2^31 rows (revision 0007).
        CREATE TABLE #request_parts (
            part int NOT NULL PRIMARY KEY,
            key_from nvarchar(450) COLLATE Latin1_General_100_BIN2 NULL,
            key_to nvarchar(450) COLLATE Latin1_General_100_BIN2 NULL
        );
        INSERT INTO #request_parts (part, key_from) VALUES (1, NULL);
        WHILE @cut < @parts
        BEGIN
            INSERT INTO #request_parts (part, key_from)
            SELECT
                @cut + 1,
                n.item_key
            FROM #request_numbered AS n
            WHERE n.position = (CAST(@cut AS bigint) * @keys) / @parts;
            SET @cut += 1;
        END;
        UPDATE p
        SET p.key_to = nxt.key_from
        FROM #request_parts AS p
        INNER JOIN #request_parts AS nxt ON nxt.part = p.part + 1;

        SET @parameters = (
            SELECT
                @source AS source,
                @encoder_name AS encoder,
                @wanted_long_text AS long_text,
                @wanted_engine AS engine
            FOR JSON PATH, WITHOUT_ARRAY_WRAPPER
        );
        CREATE TABLE #request_jobs (job_id int NOT NULL PRIMARY KEY, part int NOT NULL);
        BEGIN TRANSACTION;
        INSERT INTO heads.job_queue (
            kind, state, set_name, parameters_json, part, parts, key_from, key_to, max_attempts,
            requested_by, requested_user, requested_sid
        )
        OUTPUT inserted.job_id, inserted.part INTO #request_jobs (job_id, part)
        SELECT
            'embed',
            'queued',
            @set,
            @parameters,
            p.part,
            @parts,
            p.key_from,
            p.key_to,
            @max_attempts,
            ORIGINAL_LOGIN(),
            @my_name,
            @me
        FROM #request_parts AS p;
        -- Each row with the part whose [key_from, key_to) holds its key.
        INSERT INTO heads.job_inputs (job_id, item_key, text)
        SELECT
            j.job_id,
            r.item_key,
            r.text
        FROM #request_keys AS r
        INNER JOIN #request_parts AS p
            ON
                (p.key_from IS NULL OR r.item_key >= p.key_from)
                AND (p.key_to IS NULL OR r.item_key < p.key_to)
        INNER JOIN #request_jobs AS j ON p.part = j.part;
        SELECT @group_id = MIN(j.job_id) FROM #request_jobs AS j;
        IF @parts > 1
            UPDATE heads.job_queue
            SET group_id = @group_id
            WHERE job_id IN (SELECT j.job_id FROM #request_jobs AS j);
        COMMIT TRANSACTION;
        SELECT
            @set AS [set],
            IIF(@parts > 1, @group_id, NULL) AS group_id,
            @group_id AS first_job_id,
            @parts AS parts,
            @rows AS [rows],
            @encoder_name AS encoder,
            @wanted_engine AS engine;
    END TRY
    BEGIN CATCH
        IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;
        THROW;
    END CATCH;
END;
GO

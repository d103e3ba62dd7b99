-- heads.predict: score a set (or only the keys a caller's query returns) with the deployed
-- version of a head, or with @version, whatever its kind: a head reads the set's stored
-- vectors; a text model (a word student: its kind is in heads.settings' predict.text_kinds,
-- Python's registry) reads the rows' text through @source, or the set's own last source query
-- when the caller is its author (heads.set_source, revision 0007; anyone else passes @source:
-- 50071), run once with the caller's permissions. Walks the set by item_key range in batches of
-- @batch_rows, each committed on its own (memory stays flat; a failure loses one batch), and
-- replaces that model's earlier predictions of the same keys. Locks, Session-owned for the
-- whole run: head.use:<head> and set:<set> Shared, so drop_head and drop_set wait for it
-- (instead of deleting the model under it: error 547). @progress as in heads.embed.
-- Errors: 50001, 50002, 50003, 50007, 50008, 50012, 50014, 50016, 50017, 50024, 50071 (see
-- README).
CREATE OR ALTER PROCEDURE heads.predict
    @head nvarchar(128),
    @set nvarchar(128),
    @version int = NULL,
    @keys nvarchar(max) = NULL,
    @source nvarchar(max) = NULL,
    @batch_rows int = NULL,
    @lock_timeout_ms int = NULL,
    @progress bit = 1
AS
BEGIN
    SET NOCOUNT ON;
    SET IMPLICIT_TRANSACTIONS OFF;
    EXEC heads.assert_no_transaction @procedure = N'heads.predict';
    SET XACT_ABORT ON;
    DECLARE @locked bit = 0;
    DECLARE @started datetime2(3) = SYSUTCDATETIME();
    DECLARE @message nvarchar(2048);
    DECLARE @model_id int;
    DECLARE @model_version int;
    DECLARE @model_encoder_id int;
    DECLARE @model_sha256 char(64);
    DECLARE @model_blob varbinary(max);
    DECLARE @model_kind nvarchar(32);
    DECLARE @text_kinds nvarchar(400);
    DECLARE @reads_text bit;
    DECLARE @text_query nvarchar(max);
    DECLARE @set_id int;
    DECLARE @set_encoder_id int;
    DECLARE @total bigint;
    DECLARE @done bigint = 0;
    DECLARE @rows bigint = 0;
    DECLARE @missing bigint = 0;
    DECLARE @lower nvarchar(450);
    DECLARE @upper nvarchar(450);
    DECLARE @error_number int;
    DECLARE @error_message nvarchar(2048);
    -- Python's whitespace (str.isspace): a text of these alone is blank to Python's strip(),
    -- so T-SQL skips the same batches Python would score nothing in (revision 0006).
    DECLARE @blank nvarchar(40) = CONCAT(
        NCHAR(9), NCHAR(10), NCHAR(11), NCHAR(12), NCHAR(13), NCHAR(28), NCHAR(29), NCHAR(30),
        NCHAR(31), NCHAR(32), NCHAR(133), NCHAR(160), NCHAR(5760), NCHAR(8192), NCHAR(8193),
        NCHAR(8194), NCHAR(8195), NCHAR(8196), NCHAR(8197), NCHAR(8198), NCHAR(8199), NCHAR(8200),
        NCHAR(8201), NCHAR(8202), NCHAR(8232), NCHAR(8233), NCHAR(8239), NCHAR(8287), NCHAR(12288)
    );
    BEGIN TRY
        EXEC heads.assert_name @kind = N'head', @name = @head;
        EXEC heads.assert_name @kind = N'set', @name = @set;
        EXEC heads.setting_int @name = N'predict.batch_rows', @value = @batch_rows OUTPUT;
        EXEC heads.setting_int @name = N'lock_timeout_ms', @value = @lock_timeout_ms OUTPUT;
        SET @locked = 1;
        EXEC heads.take_lock
            @kind = N'head.use', @name = @head, @mode = N'Shared', @owner = N'Session',
            @timeout_ms = @lock_timeout_ms;
        EXEC heads.take_lock
            @kind = N'set', @name = @set, @mode = N'Shared', @owner = N'Session',
            @timeout_ms = @lock_timeout_ms;
        IF @version IS NULL
        BEGIN
            SELECT TOP (1) @model_id = d.model_id
            FROM heads.deployments AS d
            WHERE d.head = @head
            ORDER BY d.deployment_id DESC;
            IF @model_id IS NULL
            BEGIN
                IF NOT EXISTS (SELECT 1 FROM heads.models AS m WHERE m.head = @head)
                    SET @message = CONCAT(
                        N'head ''', @head, N''' has no trained versions: train it first with ',
                        N'EXEC heads.train @head = N''', @head, N''', @set = ..., @labels = ...'
                    );
                ELSE
                    SET @message = CONCAT(
                        N'head ''', @head, N''' has no deployed version: deploy one with ',
                        N'EXEC heads.deploy @head = N''', @head, N''', @version = N, or pass @version'
                    );
                THROW 50001, @message, 1;
            END;
        END;
        ELSE
        BEGIN
            SELECT @model_id = m.model_id
            FROM heads.models AS m
            WHERE m.head = @head AND m.version = @version;
            IF @model_id IS NULL
            BEGIN
                SET @message = CONCAT(
                    N'head ''', @head, N''' has no version ', @version, N': list versions with ',
                    N'SELECT * FROM heads.model_summary WHERE head = N''', @head, N''''
                );
                THROW 50001, @message, 1;
            END;
        END;
        SELECT
            @model_version = m.version,
            @model_encoder_id = m.encoder_id,
            @model_sha256 = m.sha256,
            @model_blob = m.blob,
            @model_kind = m.kind
        FROM heads.models AS m
        WHERE m.model_id = @model_id;
        EXEC heads.setting @name = N'predict.text_kinds', @value = @text_kinds OUTPUT;
        SET @reads_text = CASE
            WHEN EXISTS (
                SELECT 1
                FROM STRING_SPLIT(@text_kinds, N',') AS text_kind
                WHERE text_kind.value = @model_kind
            ) THEN 1
            ELSE 0
        END;
        SELECT
            @set_id = s.set_id,
            @set_encoder_id = s.encoder_id
        FROM heads.embedding_sets AS s
        WHERE s.name = @set;
        IF @set_id IS NULL
        BEGIN
            SET @message = CONCAT(
                N'embedding set ''', @set, N''' does not exist: create it with EXEC heads.embed ',
                N'@set = N''', @set, N''', @source = N''SELECT ... AS item_key, ... AS text FROM ...'''
            );
            THROW 50001, @message, 1;
        END;
        IF @reads_text = 0 AND @source IS NOT NULL
        BEGIN
            SET @message = CONCAT(
                N'head ''', @head, N''' version ', @model_version, N' is a ', @model_kind,
                N' that reads the set''s stored vectors, not text: leave @source NULL'
            );
            THROW 50012, @message, 1;
        END;
        IF @reads_text = 1
            EXEC heads.set_source @set_id = @set_id, @source = @source, @query = @text_query OUTPUT;
        IF @reads_text = 1 AND @text_query IS NULL
        BEGIN
            SET @message = CONCAT(
                N'set ''', @set, N''' has no source query and none was passed: a text model ',
                N'scores raw text; pass @source = N''SELECT ... AS item_key, ... AS text FROM ...'''
            );
            THROW 50024, @message, 1;
        END;
        IF @reads_text = 0 AND @set_encoder_id <> @model_encoder_id
        BEGIN
            SET @message = CONCAT(
                N'head ''', @head, N''' version ', @model_version, N' was trained on vectors of ',
                N'encoder ''', (SELECT enc.name FROM heads.encoders AS enc WHERE enc.encoder_id = @model_encoder_id),
                N''' but set ''', @set, N''' holds ''',
                (SELECT enc.name FROM heads.encoders AS enc WHERE enc.encoder_id = @set_encoder_id),
                N''': embed the texts with the head''s encoder into another set'
            );
            THROW 50007, @message, 1;
        END;

        -- The keys to score: the whole set, or the caller's query (caller's permissions).
        CREATE TABLE #predict_keys (
            item_key nvarchar(450) COLLATE DATABASE_DEFAULT NOT NULL PRIMARY KEY
        );
        IF @keys IS NOT NULL
        BEGIN
            CREATE TABLE #predict_keys_raw (item_key nvarchar(450) COLLATE DATABASE_DEFAULT NULL);
            EXEC heads.stage_query
                @what = N'keys', @query = @keys, @columns = N'item_key', @into = N'#predict_keys_raw';
            IF EXISTS (SELECT 1 FROM #predict_keys_raw AS r WHERE r.item_key IS NULL OR r.item_key = N'')
            BEGIN
                SET @message = N'the keys query returned rows with a NULL or empty item_key: '
                    + N'filter them out (WHERE key IS NOT NULL)';
                THROW 50003, @message, 1;
            END;
            INSERT INTO #predict_keys (item_key)
            SELECT DISTINCT r.item_key
            FROM #predict_keys_raw AS r
            WHERE r.item_key IS NOT NULL;
            SELECT @total = COUNT_BIG(*) FROM #predict_keys;
        END;
        ELSE IF @reads_text = 0
            SELECT @total = COUNT_BIG(*) FROM heads.embeddings AS e WHERE e.set_id = @set_id;

        -- A text model's rows: the source's texts, restricted to @keys if given; a key the
        -- source returns twice is not scored (heads.embed rejects it likewise).
        CREATE TABLE #predict_texts (
            item_key nvarchar(450) COLLATE DATABASE_DEFAULT NOT NULL PRIMARY KEY,
            text nvarchar(max) COLLATE DATABASE_DEFAULT NULL
        );
        IF @reads_text = 1
        BEGIN
            CREATE TABLE #predict_texts_raw (
                item_key nvarchar(450) COLLATE DATABASE_DEFAULT NULL,
                text nvarchar(max) COLLATE DATABASE_DEFAULT NULL
            );
            EXEC heads.stage_query
                @what = N'source', @query = @text_query, @columns = N'item_key,text',
                @into = N'#predict_texts_raw';
            INSERT INTO #predict_texts (item_key, text)
            SELECT
                counted.item_key,
                counted.text
            FROM (
                SELECT
                    raw.item_key,
                    raw.text,
                    COUNT(*) OVER (PARTITION BY raw.item_key) AS copies
                FROM #predict_texts_raw AS raw
                WHERE
                    raw.item_key IS NOT NULL
                    AND (@keys IS NULL OR EXISTS (
                        SELECT 1 FROM #predict_keys AS k WHERE k.item_key = raw.item_key
                    ))
            ) AS counted
            WHERE counted.copies = 1;
            SELECT @total = COUNT_BIG(*) FROM #predict_texts;
        END;

        CREATE TABLE #predict_batch (
            item_key nvarchar(450) COLLATE DATABASE_DEFAULT NOT NULL PRIMARY KEY,
            vector varbinary(max) NULL,
            text nvarchar(max) COLLATE DATABASE_DEFAULT NULL
        );
        CREATE TABLE #predict_output (
            item_key nvarchar(450) COLLATE DATABASE_DEFAULT NOT NULL,
            label nvarchar(400) COLLATE DATABASE_DEFAULT NOT NULL,
            score float NOT NULL,
            probabilities_json nvarchar(max) COLLATE DATABASE_DEFAULT NOT NULL
        );
        WHILE 1 = 1
        BEGIN
            TRUNCATE TABLE #predict_batch;
            IF @reads_text = 1
                INSERT INTO #predict_batch (item_key, text)
                SELECT TOP (@batch_rows)
                    t.item_key,
                    t.text
                FROM #predict_texts AS t
                WHERE @lower IS NULL OR t.item_key > @lower
                ORDER BY t.item_key
                OPTION (RECOMPILE);
            ELSE IF @keys IS NULL
                INSERT INTO #predict_batch (item_key, vector)
                SELECT TOP (@batch_rows)
                    e.item_key,
                    e.vector
                FROM heads.embeddings AS e
                WHERE e.set_id = @set_id AND (@lower IS NULL OR e.item_key > @lower)
                ORDER BY e.item_key
                OPTION (RECOMPILE);
            ELSE
                INSERT INTO #predict_batch (item_key, vector)
                SELECT TOP (@batch_rows)
                    k.item_key,
                    e.vector
                FROM #predict_keys AS k
                LEFT OUTER JOIN heads.embeddings AS e
                    ON e.set_id = @set_id AND k.item_key = e.item_key
                WHERE @lower IS NULL OR k.item_key > @lower
                ORDER BY k.item_key
                OPTION (RECOMPILE);
            IF NOT EXISTS (SELECT 1 FROM #predict_batch) BREAK;
            SELECT @upper = MAX(b.item_key) FROM #predict_batch AS b;

            TRUNCATE TABLE #predict_output;
            -- A batch without vectors or texts has nothing to score: Python is not called (it
            -- would return an empty result set, whose types SQL Server cannot see). Trimmed and
            -- compared in BIN2: under the database collation some characters compare equal to
            -- N'' (revision 0007).
            IF EXISTS (
                SELECT 1
                FROM #predict_batch AS b
                WHERE
                    b.vector IS NOT NULL
                    OR TRIM(@blank FROM b.text COLLATE Latin1_General_100_BIN2) <> N''
            )
            BEGIN
                SET @error_number = 0;
                INSERT INTO #predict_output (item_key, label, score, probabilities_json)
                EXEC heads.predict_batch
                    @model_sha256 = @model_sha256,
                    @model_blob = @model_blob,
                    @model_kind = @model_kind,
                    @error_number = @error_number OUTPUT,
                    @error_message = @error_message OUTPUT;
                IF COALESCE(@error_number, 0) <> 0 THROW @error_number, @error_message, 1;
            END;

            BEGIN TRANSACTION;
            DELETE p
            FROM heads.predictions AS p
            INNER JOIN #predict_output AS o ON p.item_key = o.item_key
            WHERE p.model_id = @model_id AND p.set_id = @set_id;
            INSERT INTO heads.predictions (
                model_id, set_id, item_key, label, score, probabilities_json
            )
            SELECT
                @model_id,
                @set_id,
                o.item_key,
                o.label,
                o.score,
                o.probabilities_json
            FROM #predict_output AS o;
            COMMIT TRANSACTION;

            SELECT
                @done = @done + COUNT_BIG(*),
                @missing = @missing + COALESCE(SUM(
                    CASE WHEN b.vector IS NULL AND b.text IS NULL THEN 1 ELSE 0 END
                ), 0)
            FROM #predict_batch AS b;
            SELECT @rows = @rows + COUNT_BIG(*) FROM #predict_output;
            EXEC heads.report_progress
                @progress = @progress, @what = N'heads.predict', @done = @done, @total = @total,
                @started = @started;
            SET @lower = @upper;
        END;

        EXEC heads.release_lock @kind = N'set', @name = @set;
        EXEC heads.release_lock @kind = N'head.use', @name = @head;
        SET @locked = 0;
        SELECT
            @head AS head,
            @model_version AS version,
            @model_id AS model_id,
            @set AS [set],
            @model_kind AS kind,
            @rows AS [rows],
            CASE WHEN @reads_text = 0 THEN @missing ELSE 0 END AS keys_without_embedding,
            CASE WHEN @reads_text = 1 THEN @missing ELSE 0 END AS keys_without_text,
            DATEDIFF_BIG(MILLISECOND, @started, SYSUTCDATETIME()) / 1000.0 AS seconds;
    END TRY
    BEGIN CATCH
        IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;
        IF @locked = 1
        BEGIN
            EXEC heads.release_lock @kind = N'set', @name = @set;
            EXEC heads.release_lock @kind = N'head.use', @name = @head;
        END;
        THROW;
    END CATCH;
END;
GO

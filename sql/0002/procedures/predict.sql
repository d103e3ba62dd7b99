-- heads.predict: score a set (or only the keys a caller's query returns) with the deployed
-- version of a head, or with @version. Walks the set by item_key range in batches of
-- @batch_rows, each committed on its own (memory stays flat; a failure loses one batch), and
-- replaces that model's earlier predictions of the same keys. Progress goes to the Messages
-- tab. Errors: 50001, 50002, 50003, 50007, 50008, 50012 (see README).
CREATE OR ALTER PROCEDURE heads.predict
    @head nvarchar(128),
    @set nvarchar(128),
    @version int = NULL,
    @keys nvarchar(max) = NULL,
    @batch_rows int = 10000
AS
BEGIN
    SET NOCOUNT ON;
    IF @@TRANCOUNT > 0
        THROW 50012, N'heads.predict commits every batch on its own: call it outside a transaction', 1;
    SET XACT_ABORT ON;
    DECLARE @started datetime2(3) = SYSUTCDATETIME();
    DECLARE @message nvarchar(2048);
    DECLARE @model_id int;
    DECLARE @model_version int;
    DECLARE @model_encoder_id int;
    DECLARE @model_sha256 char(64);
    DECLARE @model_blob varbinary(max);
    DECLARE @set_id int;
    DECLARE @set_encoder_id int;
    DECLARE @stage nvarchar(max);
    DECLARE @query nvarchar(max);
    DECLARE @total bigint;
    DECLARE @done bigint = 0;
    DECLARE @rows bigint = 0;
    DECLARE @missing bigint = 0;
    DECLARE @lower nvarchar(450);
    DECLARE @upper nvarchar(450);
    DECLARE @error_number int;
    DECLARE @error_message nvarchar(2048);
    BEGIN TRY
        EXEC heads.assert_name @kind = N'head', @name = @head;
        EXEC heads.assert_name @kind = N'set', @name = @set;
        IF @batch_rows IS NULL OR @batch_rows < 1 OR @batch_rows > 1000000
            THROW 50012, N'heads.predict: @batch_rows must be between 1 and 1000000', 1;
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
            @model_blob = m.blob
        FROM heads.models AS m
        WHERE m.model_id = @model_id;
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
        IF @set_encoder_id <> @model_encoder_id
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
            EXEC heads.assert_query_columns @what = N'keys', @query = @keys, @needed = N'item_key';
            CREATE TABLE #predict_keys_raw (item_key nvarchar(450) COLLATE DATABASE_DEFAULT NULL);
            SET @query = TRIM(NCHAR(9) + NCHAR(10) + NCHAR(13) + N' ;' FROM @keys);
            SET @stage = N'INSERT INTO #predict_keys_raw (item_key) '
                + N'SELECT keys_query.item_key FROM (' + @query + NCHAR(10) + N') AS keys_query;';
            EXEC sys.sp_executesql @stage;
            INSERT INTO #predict_keys (item_key)
            SELECT DISTINCT r.item_key
            FROM #predict_keys_raw AS r
            WHERE r.item_key IS NOT NULL;
            SELECT @total = COUNT_BIG(*) FROM #predict_keys;
        END;
        ELSE
            SELECT @total = COUNT_BIG(*) FROM heads.embeddings AS e WHERE e.set_id = @set_id;

        CREATE TABLE #predict_batch (
            item_key nvarchar(450) COLLATE DATABASE_DEFAULT NOT NULL PRIMARY KEY,
            vector varbinary(max) NULL
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
            IF @keys IS NULL
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
            SET @error_number = 0;
            INSERT INTO #predict_output (item_key, label, score, probabilities_json)
            EXEC heads.predict_batch
                @model_sha256 = @model_sha256,
                @model_blob = @model_blob,
                @error_number = @error_number OUTPUT,
                @error_message = @error_message OUTPUT;
            IF COALESCE(@error_number, 0) <> 0 THROW @error_number, @error_message, 1;

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
                @missing = @missing + COALESCE(SUM(CASE WHEN b.vector IS NULL THEN 1 ELSE 0 END), 0)
            FROM #predict_batch AS b;
            SELECT @rows = @rows + COUNT_BIG(*) FROM #predict_output;
            EXEC heads.report_progress
                @what = N'heads.predict', @done = @done, @total = @total, @started = @started;
            SET @lower = @upper;
        END;

        SELECT
            @head AS head,
            @model_version AS version,
            @model_id AS model_id,
            @set AS [set],
            @rows AS [rows],
            @missing AS keys_without_embedding,
            DATEDIFF_BIG(MILLISECOND, @started, SYSUTCDATETIME()) / 1000.0 AS seconds;
    END TRY
    BEGIN CATCH
        IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;
        THROW;
    END CATCH;
END;
GO

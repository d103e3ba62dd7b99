-- heads.replace_predictions: inside heads.deploy's and heads.roll_back's transaction, after the
-- new deployment row, score with the new version the rows the head's earlier deployed versions
-- had predicted, and delete the predictions it replaces (issue 20): heads.latest_predictions
-- shows the old rows until the commit and the new ones from it, never none. A head scores the
-- set's stored vectors in batches of 'predict.batch_rows' through heads.predict_batch; a set of
-- another encoder, and every set of a text model (its source runs with the caller's
-- permissions, which heads.predict is for), keep the earlier predictions until heads.predict.
CREATE OR ALTER PROCEDURE heads.replace_predictions
    @head nvarchar(128),
    @model_id int,
    @rows_rescored bigint OUTPUT,
    @rows_replaced bigint OUTPUT,
    @rows_kept bigint OUTPUT
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @model_encoder_id int;
    DECLARE @model_sha256 char(64);
    DECLARE @model_blob varbinary(max);
    DECLARE @model_kind nvarchar(32);
    DECLARE @text_kinds nvarchar(400);
    DECLARE @batch_rows int;
    DECLARE @set_id int;
    DECLARE @lower nvarchar(450);
    DECLARE @upper nvarchar(450);
    DECLARE @error_number int;
    DECLARE @error_message nvarchar(2048);
    SET @rows_rescored = 0;
    SET @rows_replaced = 0;
    SELECT
        @model_encoder_id = m.encoder_id,
        @model_sha256 = m.sha256,
        @model_blob = m.blob,
        @model_kind = m.kind
    FROM heads.models AS m
    WHERE m.model_id = @model_id;
    EXEC heads.setting @name = N'predict.text_kinds', @value = @text_kinds OUTPUT;
    EXEC heads.setting_int @name = N'predict.batch_rows', @value = @batch_rows OUTPUT;

    CREATE TABLE #earlier_models (model_id int NOT NULL PRIMARY KEY);
    INSERT INTO #earlier_models (model_id)
    SELECT DISTINCT d.model_id
    FROM heads.deployments AS d
    WHERE d.head = @head AND d.model_id <> @model_id;

    CREATE TABLE #rescored_sets (set_id int NOT NULL PRIMARY KEY);
    IF NOT EXISTS (
        SELECT 1
        FROM STRING_SPLIT(@text_kinds, N',') AS text_kind
        WHERE text_kind.value = @model_kind
    )
        INSERT INTO #rescored_sets (set_id)
        SELECT DISTINCT p.set_id
        FROM heads.predictions AS p
        INNER JOIN #earlier_models AS em ON p.model_id = em.model_id
        INNER JOIN heads.embedding_sets AS s ON p.set_id = s.set_id
        WHERE s.encoder_id = @model_encoder_id;

    -- heads.predict_batch reads #predict_batch; the names are its contract.
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
    SELECT @set_id = MIN(rs.set_id) FROM #rescored_sets AS rs;
    WHILE @set_id IS NOT NULL
    BEGIN
        SET @lower = NULL;
        WHILE 1 = 1
        BEGIN
            TRUNCATE TABLE #predict_batch;
            INSERT INTO #predict_batch (item_key, vector)
            SELECT TOP (@batch_rows)
                standing.item_key,
                e.vector
            FROM (
                SELECT DISTINCT p.item_key
                FROM heads.predictions AS p
                INNER JOIN #earlier_models AS em ON p.model_id = em.model_id
                WHERE p.set_id = @set_id AND (@lower IS NULL OR p.item_key > @lower)
            ) AS standing
            LEFT OUTER JOIN heads.embeddings AS e
                ON e.set_id = @set_id AND standing.item_key = e.item_key
            ORDER BY standing.item_key
            OPTION (RECOMPILE);
            IF NOT EXISTS (SELECT 1 FROM #predict_batch) BREAK;
            SELECT @upper = MAX(b.item_key) FROM #predict_batch AS b;

            TRUNCATE TABLE #predict_output;
            IF EXISTS (SELECT 1 FROM #predict_batch AS b WHERE b.vector IS NOT NULL)
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

            DELETE p
            FROM heads.predictions AS p
            INNER JOIN #predict_output AS o ON p.item_key = o.item_key
            WHERE
                p.set_id = @set_id
                AND p.model_id IN (SELECT em.model_id FROM #earlier_models AS em);
            SET @rows_replaced = @rows_replaced + @@ROWCOUNT;
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
            SET @rows_rescored = @rows_rescored + @@ROWCOUNT;
            SET @lower = @upper;
        END;
        SELECT @set_id = MIN(rs.set_id) FROM #rescored_sets AS rs WHERE rs.set_id > @set_id;
    END;
    SELECT @rows_kept = COUNT_BIG(*)
    FROM (
        SELECT DISTINCT
            p.set_id,
            p.item_key
        FROM heads.predictions AS p
        INNER JOIN #earlier_models AS em ON p.model_id = em.model_id
    ) AS kept;
END;
GO

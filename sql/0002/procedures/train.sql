-- heads.train: train a new version of a head on a set's stored vectors, for the keys and labels
-- a caller's query returns, and deploy it by policy (if-better | always | never).
--
-- @labels must return item_key and label; it runs with the caller's own permissions. The held-
-- out split is stratified and fixed by @seed; metrics are computed on it. An exclusive
-- application lock per head (sp_getapplock) makes two trainings of one head run one after the
-- other, never interleaved: each gets its own version number and sees the other's deployment.
-- Errors: 50001, 50002, 50003, 50004, 50005, 50006, 50007, 50008, 50012, 50000 (see README).
CREATE OR ALTER PROCEDURE heads.train
    @head nvarchar(128),
    @set nvarchar(128),
    @labels nvarchar(max),
    @encoder nvarchar(128) = NULL,
    @deploy varchar(16) = 'if-better',
    @hidden int = NULL,
    @epochs int = 30,
    @lr float = 0.001,
    @weight_decay float = 0.00001,
    @batch_size int = NULL,
    @dropout float = 0.1,
    @test_fraction float = 0.2,
    @seed int = 0,
    @lock_timeout_ms int = 600000
AS
BEGIN
    SET NOCOUNT ON;
    IF @@TRANCOUNT > 0
        THROW 50012, N'heads.train runs its own transaction: call it outside a transaction', 1;
    SET XACT_ABORT ON;
    DECLARE @message nvarchar(2048);
    DECLARE @set_id int;
    DECLARE @encoder_id int;
    DECLARE @encoder_name nvarchar(128);
    DECLARE @dim int;
    DECLARE @stage nvarchar(max);
    DECLARE @query nvarchar(max);
    DECLARE @lock_resource nvarchar(255) = N'heads.head:' + @head;
    DECLARE @lock_result int;
    DECLARE @deployed_macro_f1 float;
    DECLARE @error_number int = 0;
    DECLARE @error_message nvarchar(2048);
    DECLARE @version int;
    DECLARE @model_id int;
    DECLARE @deployed bit;
    BEGIN TRY
        EXEC heads.assert_name @kind = N'head', @name = @head;
        EXEC heads.assert_name @kind = N'set', @name = @set;
        IF @encoder IS NOT NULL EXEC heads.assert_name @kind = N'encoder', @name = @encoder;
        IF @deploy IS NULL OR @deploy NOT IN ('if-better', 'always', 'never')
        BEGIN
            SET @message = CONCAT(
                N'heads.train: @deploy ''', @deploy, N''' is not one of if-better, always, ',
                N'never: pass N''if-better'', N''always'' or N''never'''
            );
            THROW 50012, @message, 1;
        END;
        IF @test_fraction IS NULL OR @test_fraction <= 0 OR @test_fraction >= 1
            THROW 50012, N'heads.train: @test_fraction must be between 0 and 1 (e.g. 0.2)', 1;
        SELECT
            @set_id = s.set_id,
            @encoder_id = s.encoder_id
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
        SELECT
            @encoder_name = enc.name,
            @dim = enc.dim
        FROM heads.encoders AS enc
        WHERE enc.encoder_id = @encoder_id;
        IF @encoder IS NOT NULL AND @encoder <> @encoder_name
        BEGIN
            SET @message = CONCAT(
                N'set ''', @set, N''' holds vectors of encoder ''', @encoder_name, N''', not ''',
                @encoder, N''': train on a set embedded with that encoder, or leave @encoder NULL'
            );
            THROW 50007, @message, 1;
        END;
        EXEC heads.assert_query_columns @what = N'labels', @query = @labels, @needed = N'item_key,label';

        -- The caller's labels, read with the caller's permissions.
        CREATE TABLE #labels (
            item_key nvarchar(450) COLLATE DATABASE_DEFAULT NULL,
            label nvarchar(400) COLLATE DATABASE_DEFAULT NULL
        );
        SET @query = TRIM(NCHAR(9) + NCHAR(10) + NCHAR(13) + N' ;' FROM @labels);
        SET @stage = N'INSERT INTO #labels (item_key, label) '
            + N'SELECT labels_query.item_key, labels_query.label FROM (' + @query + NCHAR(10)
            + N') AS labels_query;';
        EXEC sys.sp_executesql @stage;
        IF EXISTS (SELECT 1 FROM #labels AS l WHERE l.item_key IS NULL)
            THROW 50003,
                N'the labels query returned rows with a NULL item_key: filter them out (WHERE key IS NOT NULL)',
                1;
        CREATE TABLE #train_input (
            item_key nvarchar(450) COLLATE DATABASE_DEFAULT NOT NULL,
            label nvarchar(400) COLLATE DATABASE_DEFAULT NULL,
            vector varbinary(max) NULL
        );
        INSERT INTO #train_input (item_key, label, vector)
        SELECT
            l.item_key,
            l.label,
            e.vector
        FROM #labels AS l
        LEFT OUTER JOIN heads.embeddings AS e
            ON e.set_id = @set_id AND l.item_key = e.item_key;

        BEGIN TRANSACTION;
        EXEC @lock_result = sys.sp_getapplock
            @Resource = @lock_resource, @LockMode = N'Exclusive', @LockOwner = N'Transaction',
            @LockTimeout = @lock_timeout_ms;
        IF @lock_result < 0
        BEGIN
            SET @message = CONCAT(
                N'head ''', @head, N''' is being trained, deployed or dropped by another ',
                N'session and the lock was not granted within ', @lock_timeout_ms,
                N' ms: try again later, or raise @lock_timeout_ms'
            );
            THROW 50000, @message, 1;
        END;
        SELECT @deployed_macro_f1 = m.macro_f1
        FROM heads.models AS m
        WHERE m.model_id = (
            SELECT TOP (1) d.model_id
            FROM heads.deployments AS d
            WHERE d.head = @head
            ORDER BY d.deployment_id DESC
        );
        CREATE TABLE #trained (
            classes_json nvarchar(max) NOT NULL,
            params_json nvarchar(max) NOT NULL,
            metrics_json nvarchar(max) NOT NULL,
            loss_curve_json nvarchar(max) NOT NULL,
            accuracy float NOT NULL,
            macro_f1 float NOT NULL,
            rows_train int NOT NULL,
            rows_test int NOT NULL,
            seconds float NOT NULL,
            blob varbinary(max) NOT NULL,
            sha256 char(64) NOT NULL,
            onnx varbinary(max) NULL,
            deploy bit NOT NULL
        );
        INSERT INTO #trained (
            classes_json, params_json, metrics_json, loss_curve_json, accuracy, macro_f1,
            rows_train, rows_test, seconds, blob, sha256, onnx, deploy
        )
        EXEC heads.train_run
            @dim = @dim,
            @hidden = @hidden,
            @epochs = @epochs,
            @lr = @lr,
            @weight_decay = @weight_decay,
            @batch_size = @batch_size,
            @dropout = @dropout,
            @test_fraction = @test_fraction,
            @seed = @seed,
            @deploy = @deploy,
            @deployed_macro_f1 = @deployed_macro_f1,
            @error_number = @error_number OUTPUT,
            @error_message = @error_message OUTPUT;
        IF COALESCE(@error_number, 0) <> 0 THROW @error_number, @error_message, 1;

        SELECT @version = COALESCE(MAX(m.version), 0) + 1
        FROM heads.models AS m
        WHERE m.head = @head;
        INSERT INTO heads.models (
            head, version, kind, set_id, encoder_id, classes_json, params_json, metrics_json,
            loss_curve_json, accuracy, macro_f1, rows_train, rows_test, seconds, blob, sha256, onnx
        )
        SELECT
            @head,
            @version,
            'mlp_head',
            @set_id,
            @encoder_id,
            t.classes_json,
            t.params_json,
            t.metrics_json,
            t.loss_curve_json,
            t.accuracy,
            t.macro_f1,
            t.rows_train,
            t.rows_test,
            t.seconds,
            t.blob,
            t.sha256,
            t.onnx
        FROM #trained AS t;
        SET @model_id = SCOPE_IDENTITY();
        SELECT @deployed = t.deploy FROM #trained AS t;
        IF @deployed = 1
            INSERT INTO heads.deployments (head, model_id, reason)
            VALUES (@head, @model_id, CONCAT(N'trained (', @deploy, N')'));
        COMMIT TRANSACTION;

        SELECT
            m.head,
            m.version,
            m.model_id,
            @set AS [set],
            @encoder_name AS encoder,
            m.classes_json,
            m.accuracy,
            m.macro_f1,
            m.rows_train,
            m.rows_test,
            @deployed AS deployed,
            @deployed_macro_f1 AS previous_deployed_macro_f1,
            m.params_json,
            m.seconds
        FROM heads.models AS m
        WHERE m.model_id = @model_id;
    END TRY
    BEGIN CATCH
        IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;
        THROW;
    END CATCH;
END;
GO

-- heads.train: train a new version of a head on a set's stored vectors, for the keys and labels
-- a caller's query returns, and deploy it as Python decides (@deploy: if-better, always, never).
--
-- @labels must return item_key and label; it runs with the caller's own permissions. Python
-- trains outside any transaction (minutes, on a large label set), with only a Shared lock on
-- the set (no drop_set underneath); then one short transaction takes the head's Exclusive lock,
-- numbers the version and writes it, so two trainings of one head never interleave and never
-- block each other for longer than that write. If another version was deployed meanwhile,
-- Python decides again (heads.decide_run). Every hyper-parameter left NULL is Python's default.
-- Errors: 50001, 50002, 50003, 50004, 50005, 50006, 50007, 50008, 50012, 50014, 50016, 50017.
CREATE OR ALTER PROCEDURE heads.train
    @head nvarchar(128),
    @set nvarchar(128),
    @labels nvarchar(max),
    @encoder nvarchar(128) = NULL,
    @deploy varchar(16) = NULL,
    @hidden int = NULL,
    @epochs int = NULL,
    @lr float = NULL,
    @weight_decay float = NULL,
    @batch_size int = NULL,
    @dropout float = NULL,
    @test_fraction float = NULL,
    @seed int = NULL,
    @lock_timeout_ms int = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SET IMPLICIT_TRANSACTIONS OFF;
    EXEC heads.assert_no_transaction @procedure = N'heads.train';
    SET XACT_ABORT ON;
    DECLARE @message nvarchar(2048);
    DECLARE @set_id int;
    DECLARE @encoder_id int;
    DECLARE @encoder_name nvarchar(128);
    DECLARE @dim int;
    DECLARE @deployed_model_id int;
    DECLARE @deployed_macro_f1 float;
    DECLARE @now_deployed_model_id int;
    DECLARE @error_number int = 0;
    DECLARE @error_message nvarchar(2048);
    DECLARE @version int;
    DECLARE @model_id int;
    DECLARE @deployed bit;
    DECLARE @reason nvarchar(200);
    DECLARE @locked bit = 0;
    BEGIN TRY
        EXEC heads.assert_name @kind = N'head', @name = @head;
        EXEC heads.assert_name @kind = N'set', @name = @set;
        IF @encoder IS NOT NULL EXEC heads.assert_name @kind = N'encoder', @name = @encoder;
        EXEC heads.setting_int @name = N'lock_timeout_ms', @value = @lock_timeout_ms OUTPUT;
        SET @locked = 1;
        EXEC heads.take_lock
            @kind = N'set', @name = @set, @mode = N'Shared', @owner = N'Session',
            @timeout_ms = @lock_timeout_ms;
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

        -- The caller's labels, read with the caller's permissions.
        CREATE TABLE #labels (
            item_key nvarchar(450) COLLATE DATABASE_DEFAULT NULL,
            label nvarchar(400) COLLATE DATABASE_DEFAULT NULL
        );
        EXEC heads.stage_query
            @what = N'labels', @query = @labels, @columns = N'item_key,label', @into = N'#labels';
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

        -- The version deployed now: Python decides against it.
        SELECT TOP (1) @deployed_model_id = d.model_id
        FROM heads.deployments AS d
        WHERE d.head = @head
        ORDER BY d.deployment_id DESC;
        SELECT @deployed_macro_f1 = m.macro_f1 FROM heads.models AS m WHERE m.model_id = @deployed_model_id;
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
            deploy bit NOT NULL,
            deploy_reason nvarchar(200) NOT NULL
        );
        INSERT INTO #trained (
            classes_json, params_json, metrics_json, loss_curve_json, accuracy, macro_f1,
            rows_train, rows_test, seconds, blob, sha256, onnx, deploy, deploy_reason
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
        SELECT
            @deployed = t.deploy,
            @reason = t.deploy_reason
        FROM #trained AS t;

        -- The short write: version number, model row and deployment, under the head's lock.
        BEGIN TRANSACTION;
        EXEC heads.take_lock
            @kind = N'head', @name = @head, @mode = N'Exclusive', @owner = N'Transaction',
            @timeout_ms = @lock_timeout_ms;
        SELECT TOP (1) @now_deployed_model_id = d.model_id
        FROM heads.deployments AS d
        WHERE d.head = @head
        ORDER BY d.deployment_id DESC;
        IF EXISTS (
            SELECT @now_deployed_model_id
            EXCEPT
            SELECT @deployed_model_id
        )
        BEGIN
            -- Another session deployed a version while this one trained: ask Python again.
            SELECT @deployed_macro_f1 = m.macro_f1
            FROM heads.models AS m
            WHERE m.model_id = @now_deployed_model_id;
            CREATE TABLE #decide (new_macro_f1 float NOT NULL, deployed_macro_f1 float NULL);
            INSERT INTO #decide (new_macro_f1, deployed_macro_f1)
            SELECT
                t.macro_f1,
                @deployed_macro_f1
            FROM #trained AS t;
            CREATE TABLE #decided (deploy bit NOT NULL, deploy_reason nvarchar(200) NOT NULL);
            INSERT INTO #decided (deploy, deploy_reason)
            EXEC heads.decide_run
                @deploy = @deploy,
                @error_number = @error_number OUTPUT,
                @error_message = @error_message OUTPUT;
            IF COALESCE(@error_number, 0) <> 0 THROW @error_number, @error_message, 1;
            SELECT
                @deployed = decision.deploy,
                @reason = decision.deploy_reason
            FROM #decided AS decision;
        END;
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
        IF @deployed = 1
            INSERT INTO heads.deployments (head, model_id, reason)
            VALUES (@head, @model_id, @reason);
        COMMIT TRANSACTION;
        EXEC heads.release_lock @kind = N'set', @name = @set;
        SET @locked = 0;

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
        IF @locked = 1 EXEC heads.release_lock @kind = N'set', @name = @set;
        THROW;
    END CATCH;
END;
GO

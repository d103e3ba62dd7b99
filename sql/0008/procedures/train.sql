-- heads.train: train a new version of a head on a set's stored vectors, for the keys and labels
-- a caller's query returns, and deploy it as Python decides (@deploy: if-better, always, never).
--
-- @labels must return item_key and label; it runs with the caller's own permissions. Python
-- trains outside any transaction (minutes, on a large label set), with only a Shared lock on
-- the set (no drop_set underneath); then heads.write_version's short transaction takes the
-- head's Exclusive lock, numbers the version and writes it (kind and parameters as Python
-- reports them), so two trainings of one head never interleave and never block each other for
-- longer than that write. Every hyper-parameter left NULL is Python's default.
-- A head's versions stay on one encoder (a version scores only sets of its own encoder):
-- a set of another encoder than the head's earlier versions is refused (50007) unless
-- @allow_encoder_change = 1 (revision 0008).
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
    @lock_timeout_ms int = NULL,
    @allow_encoder_change bit = NULL
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
    DECLARE @earlier_encoder nvarchar(128);
    DECLARE @dim int;
    DECLARE @deployed_model_id int;
    DECLARE @deployed_macro_f1 float;
    DECLARE @error_number int = 0;
    DECLARE @error_message nvarchar(2048);
    DECLARE @model_id int;
    DECLARE @deployed bit;
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
        -- NULL is 0: the change is made only when asked for.
        IF COALESCE(@allow_encoder_change, 0) = 0
        BEGIN
            SELECT TOP (1) @earlier_encoder = enc.name
            FROM heads.models AS m
            INNER JOIN heads.encoders AS enc
                ON m.encoder_id = enc.encoder_id
            WHERE m.head = @head AND m.encoder_id <> @encoder_id
            ORDER BY m.version DESC;
            IF @earlier_encoder IS NOT NULL
            BEGIN
                SET @message = CONCAT(
                    N'head ''', @head, N''' has versions on encoder ''', @earlier_encoder,
                    N''', and set ''', @set, N''' holds vectors of ''', @encoder_name,
                    N''': a version scores only sets of its own encoder. Train a head of its own for ''',
                    @encoder_name, N''' (@head = N''', @head, N'_', @encoder_name,
                    N'''), or pass @allow_encoder_change = 1 to make this version of ''', @head,
                    N''' one on ''', @encoder_name, N''' (deployed, it scores only sets of that encoder)'
                );
                THROW 50007, @message, 1;
            END;
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
        CREATE TABLE #version (
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
            deploy_reason nvarchar(200) NOT NULL,
            kind nvarchar(32) NOT NULL,
            parameters int NULL,
            teacher_accuracy float NULL
        );
        INSERT INTO #version (
            classes_json, params_json, metrics_json, loss_curve_json, accuracy, macro_f1,
            rows_train, rows_test, seconds, blob, sha256, onnx, deploy, deploy_reason, kind,
            parameters
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
        EXEC heads.write_version
            @head = @head,
            @set_id = @set_id,
            @encoder_id = @encoder_id,
            @teacher_id = NULL,
            @deploy = @deploy,
            @deployed_model_id = @deployed_model_id,
            @lock_timeout_ms = @lock_timeout_ms,
            @model_id = @model_id OUTPUT,
            @deployed = @deployed OUTPUT,
            @deployed_macro_f1 = @deployed_macro_f1 OUTPUT;
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

-- heads.write_version: the short write that ends heads.train and heads.distill. Reads the one
-- row of #version (sqlheads.procedures.TRAIN_OUTPUT, plus teacher_accuracy for a student)
-- that the caller filled from Python; under the head's Exclusive lock it numbers the version,
-- inserts the model and, as Python decided, its deployment. If another session deployed a
-- version while Python worked, Python decides again against that one (heads.decide_run), with
-- no transaction open: the lock is given up while a Python process starts, then taken again
-- and the write goes ahead only if the deployed version is still the one decided against
-- (revision 0006, issue 19 point 6). Called with no transaction open (train, distill).
-- The TF-IDF baseline's figures, or why it was skipped, come from metrics_json (issue 21).
-- Revision 0007: with the version, the keys it was trained and scored on, from the labels query
-- the caller staged in #labels (heads.train, heads.distill): heads.label_queue and heads.drift
-- leave those rows out.
-- Errors: 50012, 50016.
CREATE OR ALTER PROCEDURE heads.write_version
    @head nvarchar(128),
    @set_id int,
    @encoder_id int,
    @teacher_id int,
    @deploy varchar(16),
    @deployed_model_id int,
    @lock_timeout_ms int,
    @model_id int OUTPUT,
    @deployed bit OUTPUT,
    @deployed_macro_f1 float OUTPUT
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    DECLARE @now_deployed_model_id int;
    DECLARE @version int;
    DECLARE @reason nvarchar(200);
    DECLARE @error_number int = 0;
    DECLARE @error_message nvarchar(2048);
    DECLARE @decided_against int = @deployed_model_id;
    SELECT
        @deployed = v.deploy,
        @reason = v.deploy_reason
    FROM #version AS v;
    CREATE TABLE #decide (new_macro_f1 float NOT NULL, deployed_macro_f1 float NULL);
    CREATE TABLE #decided (deploy bit NOT NULL, deploy_reason nvarchar(200) NOT NULL);
    WHILE 1 = 1
    BEGIN
        BEGIN TRANSACTION;
        EXEC heads.take_lock
            @kind = N'head', @name = @head, @mode = N'Exclusive', @owner = N'Transaction',
            @timeout_ms = @lock_timeout_ms;
        SET @now_deployed_model_id = NULL;
        SELECT TOP (1) @now_deployed_model_id = d.model_id
        FROM heads.deployments AS d
        WHERE d.head = @head
        ORDER BY d.deployment_id DESC;
        IF NOT EXISTS (
            SELECT @now_deployed_model_id
            EXCEPT
            SELECT @decided_against
        )
            BREAK;  -- decided against the version deployed now: write, still under the lock
        -- Another session deployed a version meanwhile: give the lock up, ask Python again.
        COMMIT TRANSACTION;
        SET @decided_against = @now_deployed_model_id;
        SET @deployed_macro_f1 = NULL;
        SELECT @deployed_macro_f1 = m.macro_f1
        FROM heads.models AS m
        WHERE m.model_id = @decided_against;
        DELETE FROM #decide;
        INSERT INTO #decide (new_macro_f1, deployed_macro_f1)
        SELECT
            v.macro_f1,
            @deployed_macro_f1
        FROM #version AS v;
        DELETE FROM #decided;
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
        loss_curve_json, accuracy, macro_f1, rows_train, rows_test, seconds, blob, sha256, onnx,
        parameters, teacher_id, teacher_accuracy, baseline_accuracy, baseline_macro_f1,
        baseline_seconds, baseline_skipped
    )
    SELECT
        @head,
        @version,
        v.kind,
        @set_id,
        @encoder_id,
        v.classes_json,
        v.params_json,
        v.metrics_json,
        v.loss_curve_json,
        v.accuracy,
        v.macro_f1,
        v.rows_train,
        v.rows_test,
        v.seconds,
        v.blob,
        v.sha256,
        v.onnx,
        v.parameters,
        @teacher_id,
        v.teacher_accuracy,
        TRY_CAST(JSON_VALUE(v.metrics_json, '$.baseline.accuracy') AS float),
        TRY_CAST(JSON_VALUE(v.metrics_json, '$.baseline.macro_f1') AS float),
        TRY_CAST(JSON_VALUE(v.metrics_json, '$.baseline.seconds') AS float),
        LEFT(JSON_VALUE(v.metrics_json, '$.baseline.skipped'), 400)
    FROM #version AS v;
    SET @model_id = SCOPE_IDENTITY();
    INSERT INTO heads.labelled_keys (model_id, item_key)
    SELECT DISTINCT
        @model_id,
        l.item_key
    FROM #labels AS l
    WHERE l.item_key IS NOT NULL AND l.label IS NOT NULL AND l.label <> N'';
    IF @deployed = 1
        INSERT INTO heads.deployments (head, model_id, reason)
        VALUES (@head, @model_id, @reason);
    COMMIT TRANSACTION;
END;
GO

-- heads.add_version: the one door through which the GPU sidecar (and the Python command line on
-- SQL Server) writes a new version. In one transaction, under the head's Exclusive lock
-- (Transaction-owned, heads.take_lock: the caller holds none of its own), it asks Python for the
-- deploy decision against the version deployed now (heads.decide_run, the policy of
-- sqlheads.settings; the caller's scores decide nothing alone), numbers the version, inserts it
-- and, if deployed, deploys it and re-scores the predictions it replaces
-- (heads.replace_predictions, as heads.deploy does): a deploy that fails leaves no undeployed
-- version behind. The rights are the module owner's (ownership chaining; the signed Python
-- procedures for the Python): heads_sidecar holds no INSERT on models or deployments, nor DELETE
-- on predictions.
-- Scope (revision 0007): a sidecar passes the teacher job it holds (@job_id, @worker:
-- heads.assert_job_held) and may write only versions of that job's head or of its teacher
-- (the head plus heads.settings' teacher.suffix), on that job's set, naming only that set's
-- teacher of the same name; the deploy policy is the job's own. heads_admin passes @job_id NULL
-- and its own @deploy. @previous_macro_f1: the deployed version's, decided against (NULL: none).
-- Labelled keys (revision 0007): @labelled_keys_json, a JSON array of the keys the version
-- was trained and scored on, is written with it into heads.labelled_keys (heads.label_queue
-- and heads.drift leave those rows out); NULL or [] records none.
-- Errors: 50012, 50016, 50072, and those of heads.replace_predictions.
CREATE OR ALTER PROCEDURE heads.add_version
    @job_id int,
    @worker nvarchar(200),
    @deploy varchar(16),
    @head nvarchar(128),
    @kind varchar(32),
    @set_id int,
    @encoder_id int,
    @classes_json nvarchar(max),
    @params_json nvarchar(max),
    @metrics_json nvarchar(max),
    @loss_curve_json nvarchar(max),
    @accuracy float,
    @macro_f1 float,
    @rows_train int,
    @rows_test int,
    @seconds float,
    @blob varbinary(max),
    @sha256 varchar(64),
    @onnx varbinary(max),
    @parameters int,
    @teacher_id int,
    @teacher_accuracy float,
    @baseline_accuracy float,
    @baseline_macro_f1 float,
    @baseline_seconds float,
    @baseline_skipped nvarchar(400),
    @labelled_keys_json nvarchar(max) = NULL,
    @model_id int OUTPUT,
    @deployed bit OUTPUT,
    @previous_macro_f1 float OUTPUT
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    DECLARE @message nvarchar(2048);
    DECLARE @job_head nvarchar(128);
    DECLARE @job_set nvarchar(128);
    DECLARE @job_parameters nvarchar(max);
    DECLARE @requested_user nvarchar(128);
    DECLARE @suffix nvarchar(400);
    DECLARE @teacher_head nvarchar(256);
    DECLARE @policy varchar(16) = @deploy;
    DECLARE @lock_timeout_ms int;
    DECLARE @version int;
    DECLARE @deployed_model_id int;
    DECLARE @reason nvarchar(200);
    DECLARE @error_number int = 0;
    DECLARE @error_message nvarchar(2048);
    DECLARE @rows_rescored bigint;
    DECLARE @rows_replaced bigint;
    DECLARE @rows_kept bigint;
    EXEC heads.assert_job_held
        @job_id = @job_id,
        @worker = @worker,
        @kind = 'teacher',
        @head = @job_head OUTPUT,
        @set_name = @job_set OUTPUT,
        @parameters_json = @job_parameters OUTPUT,
        @requested_user = @requested_user OUTPUT;
    IF @job_id IS NOT NULL
    BEGIN
        EXEC heads.setting @name = N'teacher.suffix', @value = @suffix OUTPUT;
        SET @teacher_head = CONCAT(@job_head, @suffix);
        IF
            (@head IS NULL OR (@head <> @job_head AND @head <> @teacher_head))
            OR NOT EXISTS (
                SELECT 1 FROM heads.embedding_sets AS es WHERE es.set_id = @set_id AND es.name = @job_set
            )
            OR (
                @teacher_id IS NOT NULL
                AND NOT EXISTS (
                    SELECT 1
                    FROM heads.teachers AS t
                    WHERE t.teacher_id = @teacher_id AND t.set_id = @set_id AND t.name = @teacher_head
                )
            )
        BEGIN
            SET @message = CONCAT(
                N'job ', @job_id, N' writes versions of head ''', @job_head, N''' and of its ',
                N'teacher ''', @teacher_head, N''' on set ''', @job_set, N''' only, not of head ''',
                @head, N''': a sidecar writes only what the job it holds asked for'
            );
            THROW 50072, @message, 1;
        END;
        SET @policy = JSON_VALUE(@job_parameters, '$.deploy');
    END;
    EXEC heads.setting_int @name = N'lock_timeout_ms', @value = @lock_timeout_ms OUTPUT;
    CREATE TABLE #decide (new_macro_f1 float NOT NULL, deployed_macro_f1 float NULL);
    CREATE TABLE #decided (deploy bit NOT NULL, deploy_reason nvarchar(200) NOT NULL);

    BEGIN TRANSACTION;
    EXEC heads.take_lock
        @kind = N'head', @name = @head, @mode = N'Exclusive', @owner = N'Transaction',
        @timeout_ms = @lock_timeout_ms;
    -- Python's decision, against the version deployed now (no other writer can deploy one
    -- until the commit).
    SELECT TOP (1) @deployed_model_id = d.model_id
    FROM heads.deployments AS d
    WHERE d.head = @head
    ORDER BY d.deployment_id DESC;
    SET @previous_macro_f1 = NULL;
    SELECT @previous_macro_f1 = m.macro_f1 FROM heads.models AS m WHERE m.model_id = @deployed_model_id;
    INSERT INTO #decide (new_macro_f1, deployed_macro_f1) VALUES (@macro_f1, @previous_macro_f1);
    INSERT INTO #decided (deploy, deploy_reason)
    EXEC heads.decide_run
        @deploy = @policy,
        @error_number = @error_number OUTPUT,
        @error_message = @error_message OUTPUT;
    IF COALESCE(@error_number, 0) <> 0 THROW @error_number, @error_message, 1;
    SELECT
        @deployed = decision.deploy,
        @reason = decision.deploy_reason
    FROM #decided AS decision;

    SELECT @version = COALESCE(MAX(m.version), 0) + 1
    FROM heads.models AS m WITH (UPDLOCK, HOLDLOCK)
    WHERE m.head = @head;
    INSERT INTO heads.models (
        head, version, kind, set_id, encoder_id, classes_json, params_json, metrics_json,
        loss_curve_json, accuracy, macro_f1, rows_train, rows_test, seconds, blob, sha256, onnx,
        parameters, teacher_id, teacher_accuracy, baseline_accuracy, baseline_macro_f1,
        baseline_seconds, baseline_skipped
    )
    VALUES (
        @head, @version, @kind, @set_id, @encoder_id, @classes_json, @params_json,
        @metrics_json, @loss_curve_json, @accuracy, @macro_f1, @rows_train, @rows_test,
        @seconds, @blob, @sha256, @onnx, @parameters, @teacher_id, @teacher_accuracy,
        @baseline_accuracy, @baseline_macro_f1, @baseline_seconds, @baseline_skipped
    );
    SET @model_id = SCOPE_IDENTITY();
    INSERT INTO heads.labelled_keys (model_id, item_key)
    SELECT DISTINCT
        @model_id,
        CONVERT(nvarchar(450), labelled.[value])
    FROM OPENJSON(@labelled_keys_json) AS labelled
    WHERE labelled.[value] IS NOT NULL;
    IF @deployed = 1
    BEGIN
        INSERT INTO heads.deployments (head, model_id, reason)
        VALUES (@head, @model_id, @reason);
        EXEC heads.replace_predictions
            @head = @head,
            @model_id = @model_id,
            @rows_rescored = @rows_rescored OUTPUT,
            @rows_replaced = @rows_replaced OUTPUT,
            @rows_kept = @rows_kept OUTPUT;
    END;
    COMMIT TRANSACTION;
END;
GO

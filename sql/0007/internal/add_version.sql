-- heads.add_version: the sidecar's one write of a new version (issue 19, point 2). It numbers
-- the version, inserts it and, given @deploy_reason, deploys it and re-scores the predictions
-- it replaces (heads.replace_predictions, as heads.deploy does), all in one transaction: a
-- deploy that fails leaves no undeployed version behind. heads_sidecar holds EXECUTE on it and
-- no INSERT on models or deployments, nor DELETE on predictions: the module's owner's rights
-- (ownership chaining; the signed heads.predict_batch for the Python) do the writes. The
-- caller holds the head's application lock (heads.lock_resource's name, Session-owned, as
-- sqlheads.store.applocks takes it), so the version number cannot race heads.write_version.
-- Revision 0007: @labelled_keys_json, a JSON array of the keys the version was trained and
-- scored on, is written with it into heads.labelled_keys (heads.label_queue and heads.drift
-- leave those rows out); NULL or [] records none.
-- Errors: those of heads.replace_predictions.
CREATE OR ALTER PROCEDURE heads.add_version
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
    @deploy_reason nvarchar(200),
    @labelled_keys_json nvarchar(max) = NULL,
    @model_id int OUTPUT
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    DECLARE @version int;
    DECLARE @rows_rescored bigint;
    DECLARE @rows_replaced bigint;
    DECLARE @rows_kept bigint;
    BEGIN TRANSACTION;
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
    IF @deploy_reason IS NOT NULL
    BEGIN
        INSERT INTO heads.deployments (head, model_id, reason)
        VALUES (@head, @model_id, @deploy_reason);
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

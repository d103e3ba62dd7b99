-- heads.roll_back: deploy again the version that was deployed before the current one (a new
-- row of heads.deployments with Python's reason, heads.settings 'reason.roll_back', so the
-- history stays readable), re-scoring in the same transaction as heads.deploy does (issue 20).
-- ROLLBACK is a reserved word, so the verb is spelled roll_back.
-- Errors: 50001, 50002, 50014, 50016, 50017 (see README).
CREATE OR ALTER PROCEDURE heads.roll_back
    @head nvarchar(128),
    @lock_timeout_ms int = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SET IMPLICIT_TRANSACTIONS OFF;
    EXEC heads.assert_no_transaction @procedure = N'heads.roll_back';
    SET XACT_ABORT ON;
    DECLARE @message nvarchar(2048);
    DECLARE @current int;
    DECLARE @previous int;
    DECLARE @reason nvarchar(400);
    DECLARE @rows_rescored bigint;
    DECLARE @rows_replaced bigint;
    DECLARE @rows_kept bigint;
    BEGIN TRY
        EXEC heads.assert_name @kind = N'head', @name = @head;
        EXEC heads.setting_int @name = N'lock_timeout_ms', @value = @lock_timeout_ms OUTPUT;
        EXEC heads.setting @name = N'reason.roll_back', @value = @reason OUTPUT;
        BEGIN TRANSACTION;
        EXEC heads.take_lock
            @kind = N'head', @name = @head, @mode = N'Exclusive', @owner = N'Transaction',
            @timeout_ms = @lock_timeout_ms;
        SELECT TOP (1) @current = d.model_id
        FROM heads.deployments AS d
        WHERE d.head = @head
        ORDER BY d.deployment_id DESC;
        IF @current IS NULL
        BEGIN
            SET @message = CONCAT(N'head ''', @head, N''' has never been deployed: nothing to roll back');
            THROW 50001, @message, 1;
        END;
        SELECT TOP (1) @previous = d.model_id
        FROM heads.deployments AS d
        WHERE d.head = @head AND d.model_id <> @current
        ORDER BY d.deployment_id DESC;
        IF @previous IS NULL
        BEGIN
            SET @message = CONCAT(
                N'head ''', @head, N''' has had only one deployed version: nothing to roll back ',
                N'to; deploy another with EXEC heads.deploy @head = N''', @head, N''', @version = N'
            );
            THROW 50001, @message, 1;
        END;
        INSERT INTO heads.deployments (head, model_id, reason)
        VALUES (@head, @previous, @reason);
        EXEC heads.replace_predictions
            @head = @head, @model_id = @previous, @rows_rescored = @rows_rescored OUTPUT,
            @rows_replaced = @rows_replaced OUTPUT, @rows_kept = @rows_kept OUTPUT;
        COMMIT TRANSACTION;
        SELECT
            m.head,
            m.version,
            m.model_id,
            @rows_rescored AS rows_rescored,
            @rows_kept AS rows_kept_until_predict,
            @rows_replaced AS predictions_replaced
        FROM heads.models AS m
        WHERE m.model_id = @previous;
    END TRY
    BEGIN CATCH
        IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;
        THROW;
    END CATCH;
END;
GO

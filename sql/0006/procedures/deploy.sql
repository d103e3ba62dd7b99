-- heads.deploy: make @version the deployed version of a head (explicit, recorded as a new row
-- of heads.deployments with Python's reason, heads.settings 'reason.by_hand'). In the same
-- transaction heads.replace_predictions scores with it the rows the versions it replaces had
-- predicted and deletes theirs, so heads.latest_predictions never goes blank (issue 20).
-- Errors: 50001, 50002, 50014, 50016, 50017 (see README).
CREATE OR ALTER PROCEDURE heads.deploy
    @head nvarchar(128),
    @version int,
    @lock_timeout_ms int = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SET IMPLICIT_TRANSACTIONS OFF;
    EXEC heads.assert_no_transaction @procedure = N'heads.deploy';
    SET XACT_ABORT ON;
    DECLARE @message nvarchar(2048);
    DECLARE @model_id int;
    DECLARE @reason nvarchar(400);
    DECLARE @rows_rescored bigint;
    DECLARE @rows_replaced bigint;
    DECLARE @rows_kept bigint;
    BEGIN TRY
        EXEC heads.assert_name @kind = N'head', @name = @head;
        EXEC heads.setting_int @name = N'lock_timeout_ms', @value = @lock_timeout_ms OUTPUT;
        EXEC heads.setting @name = N'reason.by_hand', @value = @reason OUTPUT;
        BEGIN TRANSACTION;
        EXEC heads.take_lock
            @kind = N'head', @name = @head, @mode = N'Exclusive', @owner = N'Transaction',
            @timeout_ms = @lock_timeout_ms;
        SELECT @model_id = m.model_id
        FROM heads.models AS m
        WHERE m.head = @head AND m.version = @version;
        IF @model_id IS NULL
        BEGIN
            SET @message = CONCAT(
                N'head ''', @head, N''' has no version ', COALESCE(CONVERT(nvarchar(12), @version), N'NULL'),
                N': list versions with SELECT * FROM heads.model_summary WHERE head = N''', @head, N''''
            );
            THROW 50001, @message, 1;
        END;
        INSERT INTO heads.deployments (head, model_id, reason)
        VALUES (@head, @model_id, @reason);
        EXEC heads.replace_predictions
            @head = @head, @model_id = @model_id, @rows_rescored = @rows_rescored OUTPUT,
            @rows_replaced = @rows_replaced OUTPUT, @rows_kept = @rows_kept OUTPUT;
        COMMIT TRANSACTION;
        SELECT
            @head AS head,
            @version AS version,
            @model_id AS model_id,
            @rows_rescored AS rows_rescored,
            @rows_kept AS rows_kept_until_predict,
            @rows_replaced AS predictions_replaced;
    END TRY
    BEGIN CATCH
        IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;
        THROW;
    END CATCH;
END;
GO

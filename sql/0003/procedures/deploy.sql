-- heads.deploy: make @version the deployed version of a head (explicit, recorded as a new row
-- of heads.deployments with Python's reason, heads.settings 'reason.by_hand'; the newest row is
-- what heads.latest_predictions shows). Errors: 50001, 50002, 50014, 50016, 50017 (see README).
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
        COMMIT TRANSACTION;
        SELECT
            @head AS head,
            @version AS version,
            @model_id AS model_id;
    END TRY
    BEGIN CATCH
        IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;
        THROW;
    END CATCH;
END;
GO

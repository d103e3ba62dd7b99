-- heads.deploy: make @version the deployed version of a head (explicit, recorded as a new row
-- of heads.deployments; the newest row is what heads.latest_predictions shows).
-- Errors: 50001, 50002, 50000 (see README).
CREATE OR ALTER PROCEDURE heads.deploy
    @head nvarchar(128),
    @version int,
    @lock_timeout_ms int = 600000
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    DECLARE @message nvarchar(2048);
    DECLARE @model_id int;
    DECLARE @lock_resource nvarchar(255) = N'heads.head:' + @head;
    DECLARE @lock_result int;
    BEGIN TRY
        EXEC heads.assert_name @kind = N'head', @name = @head;
        BEGIN TRANSACTION;
        EXEC @lock_result = sys.sp_getapplock
            @Resource = @lock_resource, @LockMode = N'Exclusive', @LockOwner = N'Transaction',
            @LockTimeout = @lock_timeout_ms;
        IF @lock_result < 0
        BEGIN
            SET @message = CONCAT(
                N'head ''', @head, N''' is being trained or changed by another session: try again'
            );
            THROW 50000, @message, 1;
        END;
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
        VALUES (@head, @model_id, N'deployed by hand');
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

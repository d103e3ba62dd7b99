-- heads.roll_back: deploy again the version that was deployed before the current one (a new
-- row of heads.deployments, so the history stays readable). ROLLBACK is a reserved word, so the
-- verb is spelled roll_back. Errors: 50001, 50002, 50000 (see README).
CREATE OR ALTER PROCEDURE heads.roll_back
    @head nvarchar(128),
    @lock_timeout_ms int = 600000
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    DECLARE @message nvarchar(2048);
    DECLARE @current int;
    DECLARE @previous int;
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
        VALUES (@head, @previous, N'rollback');
        COMMIT TRANSACTION;
        SELECT
            m.head,
            m.version,
            m.model_id
        FROM heads.models AS m
        WHERE m.model_id = @previous;
    END TRY
    BEGIN CATCH
        IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;
        THROW;
    END CATCH;
END;
GO

-- heads.drop_head: delete every version of a head, its deployments and its predictions, in one
-- transaction. Errors: 50001, 50002, 50000 (see README).
CREATE OR ALTER PROCEDURE heads.drop_head
    @head nvarchar(128),
    @lock_timeout_ms int = 600000
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    DECLARE @message nvarchar(2048);
    DECLARE @versions int;
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
        SELECT @versions = COUNT(*) FROM heads.models AS m WHERE m.head = @head;
        IF @versions = 0
        BEGIN
            SET @message = CONCAT(N'head ''', @head, N''' does not exist: nothing to drop');
            THROW 50001, @message, 1;
        END;
        DELETE p
        FROM heads.predictions AS p
        INNER JOIN heads.models AS m ON p.model_id = m.model_id
        WHERE m.head = @head;
        DELETE f
        FROM heads.model_figures AS f
        INNER JOIN heads.models AS m ON f.model_id = m.model_id
        WHERE m.head = @head;
        DELETE d
        FROM heads.deployments AS d
        WHERE d.head = @head;
        DELETE m
        FROM heads.models AS m
        WHERE m.head = @head;
        COMMIT TRANSACTION;
        SELECT
            @head AS head,
            @versions AS versions_dropped;
    END TRY
    BEGIN CATCH
        IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;
        THROW;
    END CATCH;
END;
GO

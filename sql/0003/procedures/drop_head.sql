-- heads.drop_head: delete every version of a head, its deployments, figures and predictions, in
-- one transaction, holding head:<head> and head.use:<head> Exclusive so that no training,
-- deployment or predict run is writing rows of the head meanwhile (they would fail on the
-- deleted model with error 547). Errors: 50001, 50002, 50014, 50016, 50017 (see README).
CREATE OR ALTER PROCEDURE heads.drop_head
    @head nvarchar(128),
    @lock_timeout_ms int = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SET IMPLICIT_TRANSACTIONS OFF;
    EXEC heads.assert_no_transaction @procedure = N'heads.drop_head';
    SET XACT_ABORT ON;
    DECLARE @message nvarchar(2048);
    DECLARE @versions int;
    BEGIN TRY
        EXEC heads.assert_name @kind = N'head', @name = @head;
        EXEC heads.setting_int @name = N'lock_timeout_ms', @value = @lock_timeout_ms OUTPUT;
        BEGIN TRANSACTION;
        EXEC heads.take_lock
            @kind = N'head', @name = @head, @mode = N'Exclusive', @owner = N'Transaction',
            @timeout_ms = @lock_timeout_ms;
        EXEC heads.take_lock
            @kind = N'head.use', @name = @head, @mode = N'Exclusive', @owner = N'Transaction',
            @timeout_ms = @lock_timeout_ms;
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

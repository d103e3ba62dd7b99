-- heads.drop_set: delete an embedding set with its vectors, rejects and predictions. Refused
-- (50000) while a head has versions trained on the set: drop those heads first. A large set is
-- deleted in batches of @batch_rows, each committed (the log stays small); a failed drop can
-- simply be run again. Errors: 50001, 50002, 50012, 50000 (see README).
CREATE OR ALTER PROCEDURE heads.drop_set
    @set nvarchar(128),
    @batch_rows int = 50000
AS
BEGIN
    SET NOCOUNT ON;
    IF @@TRANCOUNT > 0
        THROW 50012, N'heads.drop_set commits every batch on its own: call it outside a transaction', 1;
    SET XACT_ABORT ON;
    DECLARE @started datetime2(3) = SYSUTCDATETIME();
    DECLARE @message nvarchar(2048);
    DECLARE @set_id int;
    DECLARE @heads nvarchar(2048);
    DECLARE @total bigint;
    DECLARE @done bigint = 0;
    DECLARE @deleted bigint;
    DECLARE @embeddings_deleted bigint;
    BEGIN TRY
        EXEC heads.assert_name @kind = N'set', @name = @set;
        IF @batch_rows IS NULL OR @batch_rows < 1
            THROW 50012, N'heads.drop_set: @batch_rows must be at least 1', 1;
        SELECT @set_id = s.set_id FROM heads.embedding_sets AS s WHERE s.name = @set;
        IF @set_id IS NULL
        BEGIN
            SET @message = CONCAT(N'embedding set ''', @set, N''' does not exist: nothing to drop');
            THROW 50001, @message, 1;
        END;
        SELECT @heads = STRING_AGG(h.head, N', ')
        FROM (SELECT DISTINCT m.head FROM heads.models AS m WHERE m.set_id = @set_id) AS h;
        IF @heads IS NOT NULL
        BEGIN
            SET @message = CONCAT(
                N'set ''', @set, N''' has models of head(s) ', @heads,
                N': drop those heads first (EXEC heads.drop_head @head = N''...'')'
            );
            THROW 50000, @message, 1;
        END;
        SELECT @total = COUNT_BIG(*) FROM heads.embeddings AS e WHERE e.set_id = @set_id;
        WHILE 1 = 1
        BEGIN
            DELETE TOP (@batch_rows) p FROM heads.predictions AS p WHERE p.set_id = @set_id;
            SET @deleted = @@ROWCOUNT;
            DELETE TOP (@batch_rows) r FROM heads.rejects AS r WHERE r.set_id = @set_id;
            SET @deleted = @deleted + @@ROWCOUNT;
            DELETE TOP (@batch_rows) e FROM heads.embeddings AS e WHERE e.set_id = @set_id;
            SET @embeddings_deleted = @@ROWCOUNT;
            SET @done = @done + @embeddings_deleted;
            SET @deleted = @deleted + @embeddings_deleted;
            IF @deleted = 0 BREAK;
            EXEC heads.report_progress
                @what = N'heads.drop_set', @done = @done, @total = @total, @started = @started;
        END;
        DELETE s FROM heads.embedding_sets AS s WHERE s.set_id = @set_id;
        SELECT
            @set AS [set],
            @done AS embeddings_dropped;
    END TRY
    BEGIN CATCH
        IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;
        THROW;
    END CATCH;
END;
GO

-- heads.drop_set: delete an embedding set with its vectors, rejects and predictions. Refused
-- (50015) while a head has versions trained on the set: drop those heads first. Holds
-- set:<set> Exclusive (Session-owned) for the whole run, so no embed, train or predict works on
-- the set meanwhile. A large set is deleted in batches of @batch_rows, each committed (the log
-- stays small; predictions are found through ix_predictions_set_id); a failed drop can simply
-- be run again. Errors: 50001, 50002, 50012, 50014, 50015, 50016, 50017 (see README).
CREATE OR ALTER PROCEDURE heads.drop_set
    @set nvarchar(128),
    @batch_rows int = NULL,
    @lock_timeout_ms int = NULL,
    @progress bit = 1
AS
BEGIN
    SET NOCOUNT ON;
    SET IMPLICIT_TRANSACTIONS OFF;
    EXEC heads.assert_no_transaction @procedure = N'heads.drop_set';
    SET XACT_ABORT ON;
    DECLARE @started datetime2(3) = SYSUTCDATETIME();
    DECLARE @message nvarchar(2048);
    DECLARE @set_id int;
    DECLARE @heads nvarchar(2048);
    DECLARE @total bigint;
    DECLARE @done bigint = 0;
    DECLARE @deleted bigint;
    DECLARE @embeddings_deleted bigint;
    DECLARE @locked bit = 0;
    BEGIN TRY
        EXEC heads.assert_name @kind = N'set', @name = @set;
        EXEC heads.setting_int @name = N'drop_set.batch_rows', @value = @batch_rows OUTPUT;
        EXEC heads.setting_int @name = N'lock_timeout_ms', @value = @lock_timeout_ms OUTPUT;
        SET @locked = 1;
        EXEC heads.take_lock
            @kind = N'set', @name = @set, @mode = N'Exclusive', @owner = N'Session',
            @timeout_ms = @lock_timeout_ms;
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
            THROW 50015, @message, 1;
        END;
        SELECT @total = COUNT_BIG(*) FROM heads.embeddings AS e WHERE e.set_id = @set_id;
        WHILE 1 = 1
        BEGIN
            DELETE TOP (@batch_rows) p FROM heads.predictions AS p WHERE p.set_id = @set_id;
            SET @deleted = @@ROWCOUNT;
            DELETE TOP (@batch_rows) r FROM heads.rejects AS r WHERE r.set_id = @set_id;
            SET @deleted = @deleted + @@ROWCOUNT;
            DELETE TOP (@batch_rows) sl
            FROM heads.soft_labels AS sl
            INNER JOIN heads.teachers AS t ON sl.teacher_id = t.teacher_id
            WHERE t.set_id = @set_id;
            SET @deleted = @deleted + @@ROWCOUNT;
            DELETE TOP (@batch_rows) e FROM heads.embeddings AS e WHERE e.set_id = @set_id;
            SET @embeddings_deleted = @@ROWCOUNT;
            SET @done = @done + @embeddings_deleted;
            SET @deleted = @deleted + @embeddings_deleted;
            IF @deleted = 0 BREAK;
            EXEC heads.report_progress
                @progress = @progress, @what = N'heads.drop_set', @done = @done, @total = @total,
                @started = @started;
        END;
        DELETE t FROM heads.teachers AS t WHERE t.set_id = @set_id;
        DELETE s FROM heads.embedding_sets AS s WHERE s.set_id = @set_id;
        EXEC heads.release_lock @kind = N'set', @name = @set;
        SET @locked = 0;
        SELECT
            @set AS [set],
            @done AS embeddings_dropped;
    END TRY
    BEGIN CATCH
        IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;
        IF @locked = 1 EXEC heads.release_lock @kind = N'set', @name = @set;
        THROW;
    END CATCH;
END;
GO

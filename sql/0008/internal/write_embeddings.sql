-- heads.write_embeddings: one batch of the vectors and rejects of the embed job a sidecar holds
-- (revision 0008; sqlheads.store.repository.Store.write_embed_batch), from the caller's
-- #embed_rows (item_key, text_sha256, vector, windows, reject_reason: a reject has a reason and
-- no vector), in one transaction: each key's old vector and reject go, its new one is written.
-- Scope (heads.assert_job_held): a running embed job held by @worker; @set_id must be that job's
-- set, and every key one of the rows its request captured (heads.job_inputs), else 50072; the
-- set must be the job's requester's (heads.assert_set_owner, else 50074). The sidecar holds no
-- INSERT or DELETE on heads.embeddings or heads.rejects: with them it could rewrite any set's
-- vectors (the fourth audit, finding 3). heads_admin's own Python writes with its table grants
-- and never calls this.
-- Errors: 50072, 50074.
CREATE OR ALTER PROCEDURE heads.write_embeddings
    @job_id int,
    @worker nvarchar(200),
    @set_id int
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    DECLARE @message nvarchar(2048);
    DECLARE @job_head nvarchar(128);
    DECLARE @job_set nvarchar(128);
    DECLARE @job_parameters nvarchar(max);
    DECLARE @requested_user nvarchar(128);
    DECLARE @requested_sid varbinary(85);
    EXEC heads.assert_job_held
        @job_id = @job_id,
        @worker = @worker,
        @kind = 'embed',
        @head = @job_head OUTPUT,
        @set_name = @job_set OUTPUT,
        @parameters_json = @job_parameters OUTPUT,
        @requested_user = @requested_user OUTPUT;
    IF
        @job_id IS NULL
        OR NOT EXISTS (
            SELECT 1 FROM heads.embedding_sets AS es WHERE es.set_id = @set_id AND es.name = @job_set
        )
        OR EXISTS (
            SELECT 1
            FROM #embed_rows AS r
            WHERE NOT EXISTS (
                SELECT 1 FROM heads.job_inputs AS i WHERE i.job_id = @job_id AND i.item_key = r.item_key
            )
        )
    BEGIN
        SET @message = CONCAT(
            N'job ', COALESCE(CONVERT(nvarchar(12), @job_id), N'NULL'), N' writes the vectors of ',
            N'the rows its request captured, into set ''', @job_set, N''' only: a sidecar ',
            N'writes only what the job it holds asked for'
        );
        THROW 50072, @message, 1;
    END;
    SELECT @requested_sid = q.requested_sid
    FROM heads.job_queue AS q
    WHERE q.job_id = @job_id;
    BEGIN TRANSACTION;
    EXEC heads.assert_set_owner
        @set_id = @set_id, @owner_sid = @requested_sid, @owner_user = @requested_user,
        @is_admin = 0;
    DELETE e
    FROM heads.embeddings AS e
    WHERE e.set_id = @set_id AND e.item_key IN (SELECT r.item_key FROM #embed_rows AS r);
    DELETE j
    FROM heads.rejects AS j
    WHERE j.set_id = @set_id AND j.item_key IN (SELECT r.item_key FROM #embed_rows AS r);
    INSERT INTO heads.embeddings (set_id, item_key, text_sha256, vector, windows)
    SELECT
        @set_id,
        r.item_key,
        r.text_sha256,
        r.vector,
        r.windows
    FROM #embed_rows AS r
    WHERE r.reject_reason IS NULL;
    INSERT INTO heads.rejects (set_id, item_key, reason)
    SELECT
        @set_id,
        r.item_key,
        r.reject_reason
    FROM #embed_rows AS r
    WHERE r.reject_reason IS NOT NULL;
    COMMIT TRANSACTION;
END;
GO

-- heads.assert_set_owner: THROW 50074 unless the set may be written by @owner_sid (revision
-- 0008; the fourth audit, finding 5): a set belongs to the database user who made it
-- (embedding_sets.owner_sid, their USER_SID(): a user dropped and made again under the same
-- name is another user), and only its owner, or a member of heads_admin or db_owner
-- (@is_admin), writes its vectors or its source query. A set made before revision 0008 whose
-- owner could not be told is taken by @owner_sid now. The callers pass the caller's own
-- USER_SID() (heads.embed, heads.request_embed, heads.store_set) or the requester's of the
-- embed job a sidecar holds (heads.job_set). The refusal names no other user.
-- Errors: 50074.
CREATE OR ALTER PROCEDURE heads.assert_set_owner
    @set_id int,
    @owner_sid varbinary(85),
    @owner_user nvarchar(128),
    @is_admin bit
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @message nvarchar(2048);
    DECLARE @set nvarchar(128);
    DECLARE @owner varbinary(85);
    SELECT
        @set = es.name,
        @owner = es.owner_sid
    FROM heads.embedding_sets AS es
    WHERE es.set_id = @set_id;
    IF @set IS NULL RETURN;
    IF @owner IS NULL
    BEGIN
        -- Taken by one writer: of two at once, the second finds it taken and reads who by.
        UPDATE es
        SET
            es.owner_sid = @owner_sid,
            es.owner_user = @owner_user
        FROM heads.embedding_sets AS es
        WHERE es.set_id = @set_id AND es.owner_sid IS NULL;
        SELECT @owner = es.owner_sid
        FROM heads.embedding_sets AS es
        WHERE es.set_id = @set_id;
    END;
    IF @owner = @owner_sid OR @is_admin = 1 RETURN;
    SET @message = CONCAT(
        N'set ''', @set, N''' belongs to another database user: only its owner or heads_admin ',
        N'writes into it; embed into a set of your own (another @set name)'
    );
    THROW 50074, @message, 1;
END;
GO

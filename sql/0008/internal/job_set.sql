-- heads.job_set: the set of an embed job the sidecar holds (heads.assert_job_held), created
-- now if it does not exist yet, with the encoder and long-text mode the request recorded in the
-- job's parameters (the default mode from heads.settings when the request left it out); its
-- set_id. With @record_source = 1, the set also records the request's source query and its
-- author, the job's requester, as heads.embed records its caller: that query then runs for the
-- requester alone (heads.set_source). The sidecar holds no INSERT or UPDATE on
-- heads.embedding_sets (revision 0007): it could otherwise store a query of its own under
-- another user's name, to be run with that user's rights. There is no call without a job
-- (heads_admin's own Python writes sets through heads.store_set).
-- Revision 0008: a set the job creates belongs to its requester (owner_sid, the USER_SID()
-- heads.request_embed recorded), and an existing set of another owner is refused (50074,
-- heads.assert_set_owner): a request cannot write into another user's set through a sidecar.
-- The author is recorded by security identifier too (source_sid).
-- Errors: 50001, 50012, 50072, 50074.
CREATE OR ALTER PROCEDURE heads.job_set
    @job_id int,
    @worker nvarchar(200),
    @record_source bit,
    @set_id int OUTPUT
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    DECLARE @message nvarchar(2048);
    DECLARE @job_head nvarchar(128);
    DECLARE @set nvarchar(128);
    DECLARE @parameters nvarchar(max);
    DECLARE @requested_user nvarchar(128);
    DECLARE @requested_sid varbinary(85);
    DECLARE @encoder_id int;
    DECLARE @long_text nvarchar(400);
    DECLARE @source nvarchar(max);
    EXEC heads.assert_job_held
        @job_id = @job_id,
        @worker = @worker,
        @kind = 'embed',
        @head = @job_head OUTPUT,
        @set_name = @set OUTPUT,
        @parameters_json = @parameters OUTPUT,
        @requested_user = @requested_user OUTPUT;
    IF @job_id IS NULL
        THROW 50072, N'heads.job_set writes the set of the embed job a sidecar holds: pass @job_id', 1;
    SELECT @requested_sid = q.requested_sid
    FROM heads.job_queue AS q
    WHERE q.job_id = @job_id;
    -- OPENJSON: JSON_VALUE returns NULL for a string longer than 4000 characters.
    SELECT
        @long_text = j.long_text,
        @source = j.source
    FROM OPENJSON (@parameters) WITH (
        long_text nvarchar(400) '$.long_text',
        source nvarchar(max) '$.source'
    ) AS j;
    EXEC heads.setting @name = N'long_text', @value = @long_text OUTPUT;
    SELECT @encoder_id = enc.encoder_id
    FROM heads.encoders AS enc
    WHERE enc.name = JSON_VALUE(@parameters, '$.encoder');

    BEGIN TRANSACTION;
    SET @set_id = NULL;
    SELECT @set_id = es.set_id
    FROM heads.embedding_sets AS es WITH (UPDLOCK, HOLDLOCK)
    WHERE es.name = @set;
    IF @set_id IS NULL
    BEGIN
        IF @encoder_id IS NULL
        BEGIN
            SET @message = CONCAT(
                N'job ', @job_id, N' names encoder ''', JSON_VALUE(@parameters, '$.encoder'),
                N''', which is not registered: register it and request the embedding again'
            );
            THROW 50001, @message, 1;
        END;
        INSERT INTO heads.embedding_sets (name, encoder_id, long_text, owner_sid, owner_user)
        VALUES (@set, @encoder_id, @long_text, @requested_sid, @requested_user);
        SET @set_id = SCOPE_IDENTITY();
    END;
    ELSE
        EXEC heads.assert_set_owner
            @set_id = @set_id, @owner_sid = @requested_sid, @owner_user = @requested_user,
            @is_admin = 0;
    IF @record_source = 1
        UPDATE es
        SET
            es.source_query = @source,
            es.source_user = @requested_user,
            es.source_sid = @requested_sid
        FROM heads.embedding_sets AS es
        WHERE es.set_id = @set_id;
    COMMIT TRANSACTION;
END;
GO

-- heads.enqueue_job: a job, or the parts of one, as the Python command line queues it on SQL
-- Server (revision 0008; sqlheads.store.jobs.JobQueue.enqueue: `sqlheads request-embed` and
-- `request-teacher` against a server, which read the caller's queries themselves): one job of
-- @kind per row of the caller's #job_parts (part, key_from, key_to), each with its rows of the
-- caller's #job_inputs (part, item_key, label, text), in one transaction; the parts of one
-- request share group_id (the first part's job_id). The job records its requester, the caller:
-- ORIGINAL_LOGIN(), USER_NAME() and USER_SID(). heads_admin holds no INSERT on heads.job_queue:
-- the requester of a job is always the user who queued it, so that no role can have an embed
-- job store a query under another user's name (the fourth audit, finding 4). An embed job into
-- another user's set is refused (heads.assert_set_owner, 50074) unless the caller is in
-- heads_admin. @max_attempts: NULL takes heads.settings' jobs.max_attempts.
-- Result: job_id, part (one row a part).
-- Errors: 50002, 50012, 50074.
CREATE OR ALTER PROCEDURE heads.enqueue_job
    @kind varchar(16),
    @set nvarchar(128),
    @head nvarchar(128) = NULL,
    @parameters_json nvarchar(max),
    @max_attempts int = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    DECLARE @parts int;
    DECLARE @group_id int;
    DECLARE @set_id int;
    DECLARE @me varbinary(85) = USER_SID();
    DECLARE @my_name nvarchar(128) = USER_NAME();
    DECLARE @is_admin bit = IIF(
        COALESCE(IS_MEMBER(N'heads_admin'), 0) = 1 OR COALESCE(IS_MEMBER(N'db_owner'), 0) = 1, 1, 0
    );
    EXEC heads.assert_name @kind = N'set', @name = @set;
    IF @head IS NOT NULL EXEC heads.assert_name @kind = N'head', @name = @head;
    IF COALESCE(ISJSON(@parameters_json), 0) = 0
        THROW 50012, N'a job''s parameters are one JSON object: pass @parameters_json', 1;
    EXEC heads.setting_int @name = N'jobs.max_attempts', @value = @max_attempts OUTPUT;
    SELECT @parts = COUNT(*) FROM #job_parts;
    IF @parts = 0
        THROW 50012, N'a request queues one job or more: put its parts in #job_parts', 1;
    CREATE TABLE #enqueued (job_id int NOT NULL PRIMARY KEY, part int NOT NULL);
    BEGIN TRANSACTION;
    IF @kind = 'embed'
    BEGIN
        SELECT @set_id = es.set_id
        FROM heads.embedding_sets AS es
        WHERE es.name = @set;
        IF @set_id IS NOT NULL
            EXEC heads.assert_set_owner
                @set_id = @set_id, @owner_sid = @me, @owner_user = @my_name,
                @is_admin = @is_admin;
    END;
    INSERT INTO heads.job_queue (
        kind, state, head, set_name, parameters_json, part, parts, key_from, key_to, max_attempts,
        requested_by, requested_user, requested_sid
    )
    OUTPUT inserted.job_id, inserted.part INTO #enqueued (job_id, part)
    SELECT
        @kind,
        'queued',
        @head,
        @set,
        @parameters_json,
        p.part,
        @parts,
        p.key_from,
        p.key_to,
        @max_attempts,
        ORIGINAL_LOGIN(),
        USER_NAME(),
        USER_SID()
    FROM #job_parts AS p;
    INSERT INTO heads.job_inputs (job_id, item_key, label, text)
    SELECT
        j.job_id,
        i.item_key,
        i.label,
        i.text
    FROM #job_inputs AS i
    INNER JOIN #enqueued AS j ON i.part = j.part;
    SELECT @group_id = MIN(j.job_id) FROM #enqueued AS j;
    IF @parts > 1
        UPDATE heads.job_queue
        SET group_id = @group_id
        WHERE job_id IN (SELECT j.job_id FROM #enqueued AS j);
    COMMIT TRANSACTION;
    SELECT
        j.job_id,
        j.part
    FROM #enqueued AS j
    ORDER BY j.part;
END;
GO

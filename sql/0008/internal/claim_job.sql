-- heads.claim_job: the GPU sidecar's claim (revision 0008; sqlheads.store.jobs.JobQueue.claim).
-- The first queued job, or the first running one whose heartbeat is older than
-- @stale_after_seconds (its sidecar was killed), of @kinds (a comma list; NULL: every kind),
-- becomes running and held by @worker, its attempts + 1. A stale job whose cancel was
-- requested becomes cancelled, and one that used its last attempt fails (50057, recorded in the
-- job); the claim then looks on. @job_id: the job now held, NULL when none is claimable.
-- The sidecar holds no UPDATE on heads.job_queue: this procedure and heads.heartbeat_job,
-- heads.finish_job, heads.fail_job and heads.release_job are its only transitions, each
-- checking the state it leaves and the worker that holds the job, so that no sidecar can mark
-- a finished, cancelled or other worker's job as its own (the fourth audit, finding 3).
-- Locks: UPDLOCK and READPAST, so that a second claimer skips the row a first one holds;
-- READCOMMITTEDLOCK because Microsoft's table-hints page allows READPAST under
-- READ_COMMITTED_SNAPSHOT (which docker/migrate.py turns on) at READ COMMITTED only beside it
-- (finding 6). @stale_after_seconds is bounded by heads.settings (jobs.stale_after_seconds).
-- Errors: 50012.
CREATE OR ALTER PROCEDURE heads.claim_job
    @worker nvarchar(200),
    @kinds nvarchar(100) = NULL,
    @stale_after_seconds int = NULL,
    @job_id int OUTPUT
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    DECLARE @message nvarchar(2048);
    DECLARE @found int;
    DECLARE @state varchar(16);
    DECLARE @attempts int;
    DECLARE @max_attempts int;
    DECLARE @cancel_requested int;
    SET @job_id = NULL;
    IF @worker IS NULL OR TRIM(@worker) = N''
        THROW 50012, N'a claim names the sidecar that holds it (host:pid): pass @worker', 1;
    EXEC heads.setting_int @name = N'jobs.stale_after_seconds', @value = @stale_after_seconds OUTPUT;
    WHILE @job_id IS NULL
    BEGIN
        SET @found = NULL;
        BEGIN TRANSACTION;
        SELECT TOP (1)
            @found = q.job_id,
            @state = q.state,
            @attempts = q.attempts,
            @max_attempts = q.max_attempts,
            @cancel_requested = q.cancel_requested
        FROM heads.job_queue AS q WITH (UPDLOCK, READPAST, ROWLOCK, READCOMMITTEDLOCK)
        WHERE
            (
                q.state = 'queued'
                OR (
                    q.state = 'running'
                    AND q.heartbeat_at < DATEADD(SECOND, -@stale_after_seconds, CURRENT_TIMESTAMP)
                )
            )
            AND (
                @kinds IS NULL
                OR q.kind IN (SELECT TRIM(k.value) FROM STRING_SPLIT(@kinds, N',') AS k)
            )
        ORDER BY q.job_id;
        IF @found IS NULL
        BEGIN
            COMMIT TRANSACTION;
            RETURN;
        END;
        IF @state = 'running' AND @cancel_requested = 1
        BEGIN
            UPDATE heads.job_queue
            SET state = 'cancelled', stage = N'cancelled', finished_at = CURRENT_TIMESTAMP
            WHERE job_id = @found;
            DELETE FROM heads.job_inputs WHERE job_id = @found;
        END;
        ELSE IF @state = 'running' AND @attempts >= @max_attempts
        BEGIN
            UPDATE heads.job_queue
            SET
                state = 'failed',
                finished_at = CURRENT_TIMESTAMP,
                error_number = 50057,
                error = CONCAT(
                    N'job ', @found, N' stopped heartbeating on its last attempt (', @attempts,
                    N' of ', @max_attempts, N'): its sidecar was killed or lost; see the ',
                    N'sidecar''s log, then request the job again'
                )
            WHERE job_id = @found;
            DELETE FROM heads.job_inputs WHERE job_id = @found;
        END;
        ELSE
        BEGIN
            UPDATE heads.job_queue
            SET
                state = 'running',
                claimed_by = @worker,
                attempts = attempts + 1,
                heartbeat_at = CURRENT_TIMESTAMP,
                started_at = CURRENT_TIMESTAMP,
                error = NULL,
                error_number = NULL
            WHERE job_id = @found;
            SET @job_id = @found;
        END;
        COMMIT TRANSACTION;
    END;
END;
GO

-- heads.fail_job: a running job's failure, recorded (@error_number, @error) for the sidecar
-- that holds it (revision 0008; sqlheads.store.jobs.JobQueue.fail). A @transient failure (the
-- sidecar's Python decides: a lost connection, out of memory, a busy lock) puts the job back in
-- the queue while it has attempts left; any other, or the last attempt's, fails it for good
-- and deletes its captured inputs. @state: queued or failed. A job the worker does not hold as
-- running is 50054 (heads.job_not_held): a finished job is never put back in the queue.
-- Errors: 50054.
CREATE OR ALTER PROCEDURE heads.fail_job
    @job_id int,
    @worker nvarchar(200),
    @error_number int,
    @error nvarchar(max),
    @transient bit,
    @state varchar(16) OUTPUT
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    DECLARE @attempts int;
    DECLARE @max_attempts int;
    SET @state = NULL;
    BEGIN TRANSACTION;
    SELECT
        @attempts = q.attempts,
        @max_attempts = q.max_attempts
    FROM heads.job_queue AS q WITH (UPDLOCK, ROWLOCK)
    WHERE q.job_id = @job_id AND q.claimed_by = @worker AND q.state = 'running';
    IF @@ROWCOUNT = 0
        EXEC heads.job_not_held @job_id = @job_id, @worker = @worker;
    SET @state = IIF(@transient = 1 AND @attempts < @max_attempts, 'queued', 'failed');
    UPDATE q
    SET
        q.state = @state,
        q.error = @error,
        q.error_number = @error_number,
        q.heartbeat_at = NULL,
        q.claimed_by = IIF(@state = 'queued', NULL, q.claimed_by),
        q.finished_at = IIF(@state = 'failed', CURRENT_TIMESTAMP, q.finished_at)
    FROM heads.job_queue AS q
    WHERE q.job_id = @job_id;
    IF @state = 'failed'
        DELETE FROM heads.job_inputs WHERE job_id = @job_id;
    COMMIT TRANSACTION;
END;
GO

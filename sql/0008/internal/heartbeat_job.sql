-- heads.heartbeat_job: a running job's heartbeat, and with @record_progress = 1 its progress
-- (@progress_done, @progress_total; @stage when not NULL), for the sidecar that holds it
-- (revision 0008; sqlheads.store.jobs.JobQueue.heartbeat and .progress). @cancel_requested:
-- whether its requester asked to cancel it (the sidecar then stops it). A job the worker does
-- not hold as running is 50054 (heads.job_not_held): nothing is written.
-- Errors: 50054.
CREATE OR ALTER PROCEDURE heads.heartbeat_job
    @job_id int,
    @worker nvarchar(200),
    @record_progress bit = 0,
    @progress_done int = NULL,
    @progress_total int = NULL,
    @stage nvarchar(200) = NULL,
    @cancel_requested bit OUTPUT
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    SET @cancel_requested = NULL;
    UPDATE q
    SET
        q.heartbeat_at = CURRENT_TIMESTAMP,
        q.progress_done = IIF(@record_progress = 1, @progress_done, q.progress_done),
        q.progress_total = IIF(@record_progress = 1, @progress_total, q.progress_total),
        q.stage = IIF(@record_progress = 1 AND @stage IS NOT NULL, @stage, q.stage)
    FROM heads.job_queue AS q
    WHERE q.job_id = @job_id AND q.claimed_by = @worker AND q.state = 'running';
    IF @@ROWCOUNT = 0
        EXEC heads.job_not_held @job_id = @job_id, @worker = @worker;
    SELECT @cancel_requested = q.cancel_requested
    FROM heads.job_queue AS q
    WHERE q.job_id = @job_id;
END;
GO

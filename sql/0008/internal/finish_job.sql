-- heads.finish_job: a running job done, with its result (@result_json) and, with
-- @record_progress = 1, its last progress, for the sidecar that holds it (revision 0008;
-- sqlheads.store.jobs.JobQueue.finish); its captured inputs are deleted in the same
-- transaction (nothing can resume from them). A job the worker does not hold as running is
-- 50054 (heads.job_not_held): a finished job is never finished again.
-- Errors: 50054.
CREATE OR ALTER PROCEDURE heads.finish_job
    @job_id int,
    @worker nvarchar(200),
    @result_json nvarchar(max),
    @record_progress bit = 0,
    @progress_done int = NULL,
    @progress_total int = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    BEGIN TRANSACTION;
    UPDATE q
    SET
        q.state = 'done',
        q.result_json = @result_json,
        q.finished_at = CURRENT_TIMESTAMP,
        q.stage = N'done',
        q.progress_done = IIF(@record_progress = 1, @progress_done, q.progress_done),
        q.progress_total = IIF(@record_progress = 1, @progress_total, q.progress_total)
    FROM heads.job_queue AS q
    WHERE q.job_id = @job_id AND q.claimed_by = @worker AND q.state = 'running';
    IF @@ROWCOUNT = 0
        EXEC heads.job_not_held @job_id = @job_id, @worker = @worker;
    DELETE FROM heads.job_inputs WHERE job_id = @job_id;
    COMMIT TRANSACTION;
END;
GO

-- heads.job_not_held: THROW 50054 for a transition of a job that @worker does not hold as
-- running (revision 0008): a claim taken over (its heartbeat went stale), a job finished, or
-- another worker's. The message says what the job is now. The transitions (heads.heartbeat_job,
-- heads.finish_job, heads.fail_job, heads.release_job) call it when they found no such row, so
-- that a finished or cancelled job is never revived and another worker's never taken.
-- Errors: 50054.
CREATE OR ALTER PROCEDURE heads.job_not_held
    @job_id int,
    @worker nvarchar(200)
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @message nvarchar(2048);
    DECLARE @state varchar(16);
    DECLARE @holder nvarchar(200);
    SELECT
        @state = q.state,
        @holder = q.claimed_by
    FROM heads.job_queue AS q
    WHERE q.job_id = @job_id;
    SET @message = CONCAT(
        N'job ', COALESCE(CONVERT(nvarchar(12), @job_id), N'NULL'), N' is not running under ',
        COALESCE(@worker, N'NULL'), N' (',
        CASE
            WHEN @state IS NULL THEN N'there is no such job'
            WHEN @state = 'running' THEN CONCAT(N'another sidecar holds it: ', @holder)
            ELSE CONCAT(N'it is ', @state)
        END,
        N'): a sidecar changes only a job it holds as running, and never revives a finished ',
        N'one; this sidecar leaves it'
    );
    THROW 50054, @message, 1;
END;
GO

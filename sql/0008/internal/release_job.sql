-- heads.release_job: a running job given up by the sidecar that holds it (revision 0008;
-- sqlheads.store.jobs.JobQueue.release and .mark_cancelled): with @cancelled = 0 back to the
-- queue at once (the sidecar was told to stop: SIGTERM, Ctrl-C; the attempt it used counts),
-- with @cancelled = 1 cancelled, which only a job whose requester asked to cancel it may be
-- (else 50072: a sidecar does not decide that a job ends unasked), its captured inputs
-- deleted. A job the worker does not hold as running is 50054 (heads.job_not_held).
-- Errors: 50054, 50072.
CREATE OR ALTER PROCEDURE heads.release_job
    @job_id int,
    @worker nvarchar(200),
    @cancelled bit
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    DECLARE @message nvarchar(2048);
    DECLARE @cancel_requested int;
    BEGIN TRANSACTION;
    SELECT @cancel_requested = q.cancel_requested
    FROM heads.job_queue AS q WITH (UPDLOCK, ROWLOCK)
    WHERE q.job_id = @job_id AND q.claimed_by = @worker AND q.state = 'running';
    IF @@ROWCOUNT = 0
        EXEC heads.job_not_held @job_id = @job_id, @worker = @worker;
    IF @cancelled = 1
    BEGIN
        IF @cancel_requested = 0
        BEGIN
            SET @message = CONCAT(
                N'job ', @job_id, N' was not asked to be cancelled: a sidecar cancels only a ',
                N'job whose requester cancelled it; release it to the queue, or fail it'
            );
            THROW 50072, @message, 1;
        END;
        UPDATE heads.job_queue
        SET state = 'cancelled', finished_at = CURRENT_TIMESTAMP, stage = N'cancelled'
        WHERE job_id = @job_id;
        DELETE FROM heads.job_inputs WHERE job_id = @job_id;
    END;
    ELSE
        UPDATE heads.job_queue
        SET state = 'queued', claimed_by = NULL, heartbeat_at = NULL, stage = N'released'
        WHERE job_id = @job_id;
    COMMIT TRANSACTION;
END;
GO

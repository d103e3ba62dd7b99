-- heads.assert_job_held: the scope of every write the GPU sidecar makes through a procedure
-- (heads.add_version, heads.store_soft_labels, heads.job_set). The job must be of @kind, running,
-- and claimed by @worker (the claim the sidecar took, sqlheads.store.jobs.JobQueue.claim); its
-- head, set, parameters and requester come back from the row, which the sidecar cannot rewrite
-- (heads_sidecar may UPDATE only the claim and progress columns of heads.job_queue). A job of
-- another worker, a finished one, or one of another kind is 50072. A NULL @job_id is allowed to
-- heads_admin and db_owner alone (the Python command line on SQL Server writes its own
-- versions, not a job's): @head and the rest come back NULL.
-- Errors: 50072.
CREATE OR ALTER PROCEDURE heads.assert_job_held
    @job_id int,
    @worker nvarchar(200),
    @kind varchar(16),
    @head nvarchar(128) OUTPUT,
    @set_name nvarchar(128) OUTPUT,
    @parameters_json nvarchar(max) OUTPUT,
    @requested_user nvarchar(128) OUTPUT
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @message nvarchar(2048);
    DECLARE @found int;
    SET @head = NULL;
    SET @set_name = NULL;
    SET @parameters_json = NULL;
    SET @requested_user = NULL;
    IF @job_id IS NULL
    BEGIN
        IF COALESCE(IS_MEMBER(N'heads_admin'), 0) = 0 AND COALESCE(IS_MEMBER(N'db_owner'), 0) = 0
        BEGIN
            SET @message = CONCAT(
                N'only heads_admin writes versions, sets or soft labels without a job: a sidecar ',
                N'passes the job it holds'
            );
            THROW 50072, @message, 1;
        END;
        RETURN;
    END;
    SELECT
        @found = q.job_id,
        @head = q.head,
        @set_name = q.set_name,
        @parameters_json = q.parameters_json,
        @requested_user = q.requested_user
    FROM heads.job_queue AS q
    WHERE
        q.job_id = @job_id
        AND q.kind = @kind
        AND q.state = 'running'
        AND q.claimed_by = @worker;
    IF @found IS NULL
    BEGIN
        SET @message = CONCAT(
            N'job ', @job_id, N' is not a running ', @kind, N' job held by ', @worker,
            N': a sidecar writes only for the job it claimed, while it holds it; ',
            N'claim the job again (sqlheads sidecar) if its claim went stale'
        );
        THROW 50072, @message, 1;
    END;
END;
GO

-- heads.cancel_job: cancel a sidecar job. A queued job is cancelled at once; a running one is
-- marked cancel_requested and its sidecar stops it at its next heartbeat (state cancelled).
-- A finished job (done, failed, cancelled) cannot be cancelled (50050). The same verb as
-- `sqlheads cancel-job` (sqlheads.store.jobs.JobQueue.cancel). Only the job's requester (its
-- database user) or a member of heads_admin (or db_owner) may cancel it (revision 0006, issue
-- 19). A job queued before 0006 names no requester: only heads_admin may cancel it (revision
-- 0007; `@requested_user <> USER_NAME()` is UNKNOWN for it, which let anyone), as only
-- heads_admin sees it in heads.jobs. Revision 0008: the requester is compared by security
-- identifier (requested_sid against USER_SID()), so that a user dropped and made again under
-- the same name is another user (the fourth audit, finding 9); a job queued before 0008 whose
-- requester was still a user then was given that user's SID by the migration. The refusal names
-- no other user. Result: job_id, state.
-- Errors: 50001, 50017, 50050, 50070 (see README).
CREATE OR ALTER PROCEDURE heads.cancel_job
    @job_id int
AS
BEGIN
    SET NOCOUNT ON;
    SET IMPLICIT_TRANSACTIONS OFF;
    EXEC heads.assert_no_transaction @procedure = N'heads.cancel_job';
    SET XACT_ABORT ON;
    DECLARE @message nvarchar(2048);
    DECLARE @state varchar(16);
    DECLARE @after varchar(16);
    DECLARE @requested_sid varbinary(85);
    BEGIN TRY
        BEGIN TRANSACTION;
        -- UPDLOCK: a sidecar's claim of the same row waits for this decision (or skips it).
        SELECT
            @state = q.state,
            @requested_sid = q.requested_sid
        FROM heads.job_queue AS q WITH (UPDLOCK, ROWLOCK)
        WHERE q.job_id = @job_id;
        IF @state IS NULL
        BEGIN
            SET @message = CONCAT(
                N'job ', COALESCE(CONVERT(nvarchar(12), @job_id), N'NULL'),
                N' does not exist: list the jobs with SELECT * FROM heads.jobs'
            );
            THROW 50001, @message, 1;
        END;
        IF
            (@requested_sid IS NULL OR @requested_sid <> USER_SID())
            AND COALESCE(IS_MEMBER(N'heads_admin'), 0) = 0
            AND COALESCE(IS_MEMBER(N'db_owner'), 0) = 0
        BEGIN
            SET @message = CONCAT(
                N'job ', @job_id, N' was not requested by you (or was queued before requesters ',
                N'were recorded): only its requester or heads_admin may cancel it'
            );
            THROW 50070, @message, 1;
        END;
        IF @state NOT IN ('queued', 'running')
        BEGIN
            SET @message = CONCAT(
                N'job ', @job_id, N' is ', @state, N': only queued or running jobs can be ',
                N'cancelled; request the work again if you need it'
            );
            THROW 50050, @message, 1;
        END;
        IF @state = 'queued'
        BEGIN
            UPDATE heads.job_queue
            SET state = 'cancelled', stage = N'cancelled', finished_at = CURRENT_TIMESTAMP
            WHERE job_id = @job_id;
            DELETE FROM heads.job_inputs WHERE job_id = @job_id;  -- nothing will read them
            SET @after = 'cancelled';
        END;
        ELSE
        BEGIN
            UPDATE heads.job_queue
            SET cancel_requested = 1
            WHERE job_id = @job_id;
            SET @after = 'cancel_requested';
        END;
        COMMIT TRANSACTION;
        SELECT
            @job_id AS job_id,
            @after AS state;
    END TRY
    BEGIN CATCH
        IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;
        THROW;
    END CATCH;
END;
GO

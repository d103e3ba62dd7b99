-- heads.jobs: the sidecar's queue as an analyst reads it in SSMS (newest first with ORDER BY
-- job_id DESC): what was requested, which sidecar holds it, its stage and progress, its error
-- or its result, and who asked. Mirrors jobs_select() in store/schema.py.
-- Each caller sees the jobs they requested (their database user), never another caller's
-- parameters (query texts included); heads_admin and db_owner see every job (revision 0006,
-- issue 19). Revision 0008: by security identifier (requested_sid, USER_SID()), not by name.
CREATE OR ALTER VIEW heads.jobs
AS
SELECT
    q.job_id,
    q.kind,
    q.state,
    q.head,
    q.set_name,
    q.group_id,
    q.part,
    q.parts,
    q.key_from,
    q.key_to,
    q.attempts,
    q.max_attempts,
    q.claimed_by,
    q.heartbeat_at,
    q.cancel_requested,
    q.stage,
    q.progress_done,
    q.progress_total,
    q.error_number,
    q.error,
    q.result_json,
    q.parameters_json,
    q.requested_at,
    q.started_at,
    q.finished_at,
    q.requested_by,
    q.requested_user
FROM heads.job_queue AS q
WHERE
    q.requested_sid = USER_SID()
    OR IS_MEMBER(N'heads_admin') = 1
    OR IS_MEMBER(N'db_owner') = 1;
GO

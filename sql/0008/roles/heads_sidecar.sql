-- heads_sidecar: the GPU sidecar's own login (docker/migrate.py creates heads_sidecar_login
-- from SIDECAR_PASSWORD). Exactly what `sqlheads sidecar` reads, and the procedures that write
-- for it; tests/test_sqlserver_grants.py runs the sidecar on SQLite under these grants (its
-- start-up, an embed job, a teacher job with transfer rows and both students, its
-- healthcheck), and fails on a read or write they do not allow, and on a grant here that the
-- run does not use. No EXECUTE ANY EXTERNAL SCRIPT: it runs its own Python in its own container.
-- From revision 0006 the sidecar runs no analyst's query (issue 19): it reads only what the
-- request captured into heads.job_inputs, so it needs no SELECT on the analysts' tables.
-- Revision 0008 (the fourth audit, findings 1 to 3):
--   alembic_version: SELECT, which `sqlheads sidecar` and its healthcheck read first (without
--     it the table is not even listed to the login, and the sidecar refused to start, 50014);
--   job_queue, job_inputs: SELECT only. Every transition of a job goes through a procedure that
--     checks it (heads.claim_job: queued, or running with a stale heartbeat, to running under
--     this worker; heads.heartbeat_job; heads.finish_job and heads.fail_job: running under this
--     worker to done, failed or queued again; heads.release_job: to the queue, or cancelled
--     when its requester asked), so no sidecar can mark a finished, cancelled or other worker's
--     job as its own: the column UPDATE grants of 0007 are gone, as is DELETE on job_inputs
--     (the procedures delete a finished job's inputs);
--   embeddings, rejects: SELECT only; an embed job writes its batches through
--     heads.write_embeddings, into its own set and for the rows its request captured alone;
--   transfer_sets, transfer_rows: SELECT (the teacher job's students read the rows the teacher
--     scored); written through heads.write_transfer_rows, for that job's teacher alone;
--   encoders, embedding_sets, models, deployments, teachers, soft_labels: SELECT. Sets,
--     versions and soft labels are written through heads.job_set, heads.add_version and
--     heads.store_soft_labels, each scoped to the job this worker holds (heads.assert_job_held).
-- The migration revokes every earlier grant of the role before this runs.
IF DATABASE_PRINCIPAL_ID(N'heads_sidecar') IS NULL
    CREATE ROLE heads_sidecar;
GRANT SELECT ON OBJECT::heads.alembic_version TO heads_sidecar;
GRANT SELECT ON OBJECT::heads.job_queue TO heads_sidecar;
GRANT SELECT ON OBJECT::heads.job_inputs TO heads_sidecar;
GRANT SELECT ON OBJECT::heads.encoders TO heads_sidecar;
GRANT SELECT ON OBJECT::heads.embedding_sets TO heads_sidecar;
GRANT SELECT ON OBJECT::heads.embeddings TO heads_sidecar;
GRANT SELECT ON OBJECT::heads.rejects TO heads_sidecar;
GRANT SELECT ON OBJECT::heads.models TO heads_sidecar;
GRANT SELECT ON OBJECT::heads.deployments TO heads_sidecar;
GRANT SELECT ON OBJECT::heads.teachers TO heads_sidecar;
GRANT SELECT ON OBJECT::heads.soft_labels TO heads_sidecar;
GRANT SELECT ON OBJECT::heads.transfer_sets TO heads_sidecar;
GRANT SELECT ON OBJECT::heads.transfer_rows TO heads_sidecar;
GRANT EXECUTE ON OBJECT::heads.claim_job TO heads_sidecar;
GRANT EXECUTE ON OBJECT::heads.heartbeat_job TO heads_sidecar;
GRANT EXECUTE ON OBJECT::heads.finish_job TO heads_sidecar;
GRANT EXECUTE ON OBJECT::heads.fail_job TO heads_sidecar;
GRANT EXECUTE ON OBJECT::heads.release_job TO heads_sidecar;
GRANT EXECUTE ON OBJECT::heads.job_set TO heads_sidecar;
GRANT EXECUTE ON OBJECT::heads.write_embeddings TO heads_sidecar;
GRANT EXECUTE ON OBJECT::heads.write_transfer_rows TO heads_sidecar;
GRANT EXECUTE ON OBJECT::heads.add_version TO heads_sidecar;
GRANT EXECUTE ON OBJECT::heads.store_soft_labels TO heads_sidecar;
GO

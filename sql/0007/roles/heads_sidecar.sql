-- heads_sidecar: the GPU sidecar's own login (docker/migrate.py creates heads_sidecar_login
-- from SIDECAR_PASSWORD). Exactly what `sqlheads sidecar` reads and writes, table by table, and
-- the procedures that write for it, each scoped to the job it holds (heads.assert_job_held: a
-- running job claimed by the calling worker). No EXECUTE ANY EXTERNAL SCRIPT: it runs its own
-- Python in its own container.
--   job_queue: claims, heartbeats, progress, results and errors: SELECT, and UPDATE of those
--     columns alone (revision 0007): never the requester, the parameters, the kind, head, set
--     or key range of a job, nor its cancel flag (analysts insert requests through
--     heads.request_* and cancel through heads.cancel_job);
--   job_inputs: the rows each request captured with its requester's permissions (SELECT;
--     DELETE once the job is finished);
--   encoders, settings: the set's encoder (SELECT);
--   embedding_sets: SELECT only (revision 0007). An embed job creates its set and records the
--     request's source query, with the requester as its author, through heads.job_set: a
--     table grant would let the sidecar store a query of its own under another user's name,
--     to be run with that user's rights;
--   embeddings, rejects: embed jobs replace a batch's rows (SELECT, INSERT, DELETE: a row
--     whose text changed is deleted and written again, as heads.embed does);
--   models, model_figures, deployments: read only (SELECT). Teacher jobs add the teacher and
--     student versions of their own head through heads.add_version, which decides the
--     deployment itself (Python's policy, against the version deployed now) and re-scores the
--     predictions it replaces, with the procedure's rights;
--   teachers, soft_labels: SELECT only (revision 0007); the teacher's soft labels are written
--     through heads.store_soft_labels.
-- From revision 0006 the sidecar runs no analyst's query (issue 19): it reads only what the
-- request captured into heads.job_inputs, so it needs no SELECT on the analysts' tables.
-- The migration revokes every earlier grant of the role before this runs.
IF DATABASE_PRINCIPAL_ID(N'heads_sidecar') IS NULL
    CREATE ROLE heads_sidecar;
GRANT SELECT ON OBJECT::heads.job_queue TO heads_sidecar;
GRANT UPDATE (
    state, claimed_by, attempts, heartbeat_at, started_at, finished_at, stage, progress_done,
    progress_total, result_json, error_number, error
) ON OBJECT::heads.job_queue TO heads_sidecar;
GRANT SELECT, DELETE ON OBJECT::heads.job_inputs TO heads_sidecar;
GRANT SELECT ON OBJECT::heads.encoders TO heads_sidecar;
GRANT SELECT ON OBJECT::heads.settings TO heads_sidecar;
GRANT SELECT ON OBJECT::heads.embedding_sets TO heads_sidecar;
GRANT SELECT, INSERT, DELETE ON OBJECT::heads.embeddings TO heads_sidecar;
GRANT SELECT, INSERT, DELETE ON OBJECT::heads.rejects TO heads_sidecar;
GRANT SELECT ON OBJECT::heads.models TO heads_sidecar;
GRANT SELECT ON OBJECT::heads.model_figures TO heads_sidecar;
GRANT SELECT ON OBJECT::heads.deployments TO heads_sidecar;
GRANT SELECT ON OBJECT::heads.teachers TO heads_sidecar;
GRANT SELECT ON OBJECT::heads.soft_labels TO heads_sidecar;
GRANT EXECUTE ON OBJECT::heads.add_version TO heads_sidecar;
GRANT EXECUTE ON OBJECT::heads.store_soft_labels TO heads_sidecar;
GRANT EXECUTE ON OBJECT::heads.job_set TO heads_sidecar;
GO

-- heads_sidecar: the GPU sidecar's own login (docker/migrate.py creates heads_sidecar_login
-- from SIDECAR_PASSWORD). Exactly what `sqlheads sidecar` reads and writes, table by table; no
-- procedure but heads.add_version, and no EXECUTE ANY EXTERNAL SCRIPT: it runs its own Python
-- in its own container.
--   job_queue: claims, heartbeats, progress, results and errors (SELECT, UPDATE; analysts
--     insert requests through heads.request_*);
--   encoders, settings: the set's encoder (SELECT);
--   embedding_sets: embed jobs create a set and record its source query (SELECT, INSERT,
--     UPDATE);
--   embeddings, rejects: embed jobs replace a batch's rows (SELECT, INSERT, DELETE: a row
--     whose text changed is deleted and written again, as heads.embed does);
--   models, model_figures, deployments: read only (SELECT). Teacher jobs add the teacher and
--     student versions and deploy them by their policy through heads.add_version (EXECUTE):
--     the version, its deployment and the predictions it replaces are one transaction with
--     the procedure's rights (issue 19, point 2), so the role needs no INSERT on models or
--     deployments and no DELETE on predictions;
--   teachers, soft_labels: the teacher's soft labels, replaced whole when it is retrained
--     (SELECT, INSERT, UPDATE on teachers; SELECT, INSERT, DELETE on soft_labels).
--   job_inputs: the rows each request captured with its requester's permissions (SELECT;
--     DELETE once the job is finished).
-- From revision 0006 the sidecar runs no analyst's query (issue 19): it reads only what the
-- request captured into heads.job_inputs, so it needs no SELECT on the analysts' tables.
-- The migration revokes every earlier grant of the role before this runs.
IF DATABASE_PRINCIPAL_ID(N'heads_sidecar') IS NULL
    CREATE ROLE heads_sidecar;
GRANT SELECT, UPDATE ON OBJECT::heads.job_queue TO heads_sidecar;
GRANT SELECT, DELETE ON OBJECT::heads.job_inputs TO heads_sidecar;
GRANT SELECT ON OBJECT::heads.encoders TO heads_sidecar;
GRANT SELECT ON OBJECT::heads.settings TO heads_sidecar;
GRANT SELECT, INSERT, UPDATE ON OBJECT::heads.embedding_sets TO heads_sidecar;
GRANT SELECT, INSERT, DELETE ON OBJECT::heads.embeddings TO heads_sidecar;
GRANT SELECT, INSERT, DELETE ON OBJECT::heads.rejects TO heads_sidecar;
GRANT SELECT ON OBJECT::heads.models TO heads_sidecar;
GRANT SELECT ON OBJECT::heads.model_figures TO heads_sidecar;
GRANT SELECT ON OBJECT::heads.deployments TO heads_sidecar;
GRANT EXECUTE ON OBJECT::heads.add_version TO heads_sidecar;
GRANT SELECT, INSERT, UPDATE ON OBJECT::heads.teachers TO heads_sidecar;
GRANT SELECT, INSERT, DELETE ON OBJECT::heads.soft_labels TO heads_sidecar;
GO

-- heads_sidecar: the GPU sidecar's own login (see docker/compose.yaml). It reads the vectors,
-- sets, encoders and models it needs and writes new model versions and their figures; it runs
-- its own Python, so it gets no EXECUTE ANY EXTERNAL SCRIPT and no procedure. The job queue's
-- grants arrive with the sidecar's migration.
IF DATABASE_PRINCIPAL_ID(N'heads_sidecar') IS NULL
    CREATE ROLE heads_sidecar;
GRANT SELECT ON OBJECT::heads.encoders TO heads_sidecar;
GRANT SELECT ON OBJECT::heads.embedding_sets TO heads_sidecar;
GRANT SELECT ON OBJECT::heads.embeddings TO heads_sidecar;
GRANT SELECT, INSERT ON OBJECT::heads.models TO heads_sidecar;
GRANT SELECT, INSERT ON OBJECT::heads.model_figures TO heads_sidecar;
GO

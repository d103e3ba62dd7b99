-- heads_reader: what a BI tool's login gets. SELECT on the views and nothing else: no table
-- (so no blob, no vector, no model), no procedure, no external script. Since revision 0005 the
-- views include heads.jobs, the GPU sidecar's queue (what was requested, its state, progress
-- and error); since revision 0007 heads.sets, the embedding sets without their stored query
-- texts, heads.label_queue (the rows to label next for each deployed version) and heads.drift
-- (whether the sets a deployed version scores still look like its training data). Since
-- revision 0008 heads.alembic_version (the schema revision, one row): every `sqlheads` command
-- reads it before anything else (sqlheads.store.migrations.ensure_current), and without a
-- permission on it the table is not even listed (INFORMATION_SCHEMA shows a user the tables it
-- may use), so `sqlheads --url mssql+... jobs` refused every reader and analyst with 50014 "has
-- no sqlheads tables" (the fourth audit, finding 1). The migration revokes every earlier grant
-- of the role before this runs.
IF DATABASE_PRINCIPAL_ID(N'heads_reader') IS NULL
    CREATE ROLE heads_reader;
GRANT SELECT ON OBJECT::heads.latest_predictions TO heads_reader;
GRANT SELECT ON OBJECT::heads.model_summary TO heads_reader;
GRANT SELECT ON OBJECT::heads.report_figures TO heads_reader;
GRANT SELECT ON OBJECT::heads.jobs TO heads_reader;
GRANT SELECT ON OBJECT::heads.sets TO heads_reader;
GRANT SELECT ON OBJECT::heads.label_queue TO heads_reader;
GRANT SELECT ON OBJECT::heads.drift TO heads_reader;
GRANT SELECT ON OBJECT::heads.alembic_version TO heads_reader;
GO

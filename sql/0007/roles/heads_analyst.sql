-- heads_analyst: runs the analyst's day, and nothing else. EXECUTE on the verbs (their tables
-- are reached through ownership chaining, not granted), SELECT on the views (as heads_reader),
-- on the rejects, the sets and the settings (to see the defaults). No EXECUTE ANY EXTERNAL
-- SCRIPT since revision 0003: the procedures that run Python are signed (module signing,
-- heads.sign_external_scripts), so an analyst runs sqlheads' fixed scripts, never their own
-- Python (issue 10, point 17). An analyst's source and labels queries run with the analyst's
-- own permissions. Since revision 0005 an analyst also requests and cancels the GPU
-- sidecar's jobs (and reads heads.jobs as a heads_reader); since 0006 each request captures
-- the rows of its queries with the analyst's permissions. Since 0007 an analyst reads the sets
-- through heads.sets (as a heads_reader), not heads.embedding_sets: its source_query column
-- holds other users' query texts. The migration revokes every earlier grant of the role before
-- this runs.
IF DATABASE_PRINCIPAL_ID(N'heads_analyst') IS NULL
    CREATE ROLE heads_analyst;
IF NOT EXISTS (
    SELECT 1
    FROM sys.database_role_members AS rm
    WHERE
        rm.role_principal_id = DATABASE_PRINCIPAL_ID(N'heads_reader')
        AND rm.member_principal_id = DATABASE_PRINCIPAL_ID(N'heads_analyst')
)
    ALTER ROLE heads_reader ADD MEMBER heads_analyst;
GRANT EXECUTE ON OBJECT::heads.embed TO heads_analyst;
GRANT EXECUTE ON OBJECT::heads.train TO heads_analyst;
GRANT EXECUTE ON OBJECT::heads.predict TO heads_analyst;
GRANT EXECUTE ON OBJECT::heads.distill TO heads_analyst;
GRANT EXECUTE ON OBJECT::heads.deploy TO heads_analyst;
GRANT EXECUTE ON OBJECT::heads.roll_back TO heads_analyst;
GRANT EXECUTE ON OBJECT::heads.request_embed TO heads_analyst;
GRANT EXECUTE ON OBJECT::heads.request_teacher TO heads_analyst;
GRANT EXECUTE ON OBJECT::heads.cancel_job TO heads_analyst;
GRANT SELECT ON OBJECT::heads.rejects TO heads_analyst;
GRANT SELECT ON OBJECT::heads.teachers TO heads_analyst;
GRANT SELECT ON OBJECT::heads.settings TO heads_analyst;
GO

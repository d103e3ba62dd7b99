-- heads_analyst: runs the analyst's day. EXECUTE on the verbs (their tables are reached through
-- ownership chaining, not granted), SELECT on the views (as heads_reader) and on the rejects,
-- and EXECUTE ANY EXTERNAL SCRIPT, which SQL Server checks on the caller of every procedure that
-- runs Python. An analyst's source and labels queries run with the analyst's own permissions.
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
GRANT EXECUTE ON OBJECT::heads.deploy TO heads_analyst;
GRANT EXECUTE ON OBJECT::heads.roll_back TO heads_analyst;
GRANT SELECT ON OBJECT::heads.rejects TO heads_analyst;
GRANT SELECT ON OBJECT::heads.embedding_sets TO heads_analyst;
GRANT EXECUTE ANY EXTERNAL SCRIPT TO heads_analyst;
GO

-- heads_admin: everything an analyst can do, plus dropping heads and sets, and reading and
-- writing every table of the heads schema (registering encoders, inspecting model blobs), and,
-- from revision 0006, heads.add_version: the Python CLI on SQL Server writes a version and its
-- deployment through it in one transaction, as the sidecar does (issue 19, point 2); from 0007
-- also heads.store_soft_labels, through which it stores a teacher's soft labels, as the sidecar
-- does. Both take @job_id NULL from heads_admin alone (heads.assert_job_held).
IF DATABASE_PRINCIPAL_ID(N'heads_admin') IS NULL
    CREATE ROLE heads_admin;
IF NOT EXISTS (
    SELECT 1
    FROM sys.database_role_members AS rm
    WHERE
        rm.role_principal_id = DATABASE_PRINCIPAL_ID(N'heads_analyst')
        AND rm.member_principal_id = DATABASE_PRINCIPAL_ID(N'heads_admin')
)
    ALTER ROLE heads_analyst ADD MEMBER heads_admin;
GRANT EXECUTE ON OBJECT::heads.drop_head TO heads_admin;
GRANT EXECUTE ON OBJECT::heads.drop_set TO heads_admin;
GRANT EXECUTE ON OBJECT::heads.add_version TO heads_admin;
GRANT EXECUTE ON OBJECT::heads.store_soft_labels TO heads_admin;
GRANT SELECT, INSERT, UPDATE, DELETE ON SCHEMA::heads TO heads_admin;
GO

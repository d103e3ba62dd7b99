-- heads_admin: everything an analyst can do, plus dropping heads and sets, reading every table
-- of the heads schema and deleting from any (registering encoders, inspecting model blobs,
-- clean-up), and from revision 0006 heads.add_version: the Python CLI on SQL Server writes a
-- version and its deployment through it in one transaction, as the sidecar does (issue 19,
-- point 2); from 0007 also heads.store_soft_labels, through which it stores a teacher's soft
-- labels, as the sidecar does. Both take @job_id NULL from heads_admin alone
-- (heads.assert_job_held), as does heads.write_transfer_rows (0008).
-- Revision 0008 (the fourth audit, finding 4): heads_admin is trusted with the data of the heads
-- schema, not with other users' identities. It inserts and updates every table but two:
-- heads.embedding_sets and heads.job_queue, whose columns decide as whom a stored query runs (a
-- set's source query and its author; a job's requester and parameters, which an embed job
-- records as its set's source query and author). With those grants it could plant a query
-- under an analyst's name, to be run later with the analyst's rights on tables it may not read
-- itself. Those two tables are written by procedures alone, each recording the caller (or, for
-- a sidecar's embed job, its requester) as the author: the Python CLI makes sets and records
-- their source queries through heads.store_set, and queues jobs through heads.enqueue_job. It
-- may UPDATE a set's owner (owner_sid, owner_user) alone, to give an ownerless set (made before
-- 0008) an owner: the owner decides who writes a set's vectors, never as whom a query runs.
-- The migration revokes every earlier grant of the role before this runs.
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
GRANT EXECUTE ON OBJECT::heads.write_transfer_rows TO heads_admin;
GRANT EXECUTE ON OBJECT::heads.store_set TO heads_admin;
GRANT EXECUTE ON OBJECT::heads.enqueue_job TO heads_admin;
GRANT SELECT, DELETE ON SCHEMA::heads TO heads_admin;
GRANT INSERT, UPDATE ON OBJECT::heads.encoders TO heads_admin;
GRANT INSERT, UPDATE ON OBJECT::heads.embeddings TO heads_admin;
GRANT INSERT, UPDATE ON OBJECT::heads.rejects TO heads_admin;
GRANT INSERT, UPDATE ON OBJECT::heads.teachers TO heads_admin;
GRANT INSERT, UPDATE ON OBJECT::heads.soft_labels TO heads_admin;
GRANT INSERT, UPDATE ON OBJECT::heads.models TO heads_admin;
GRANT INSERT, UPDATE ON OBJECT::heads.model_figures TO heads_admin;
GRANT INSERT, UPDATE ON OBJECT::heads.deployments TO heads_admin;
GRANT INSERT, UPDATE ON OBJECT::heads.labelled_keys TO heads_admin;
GRANT INSERT, UPDATE ON OBJECT::heads.predictions TO heads_admin;
GRANT INSERT, UPDATE ON OBJECT::heads.job_inputs TO heads_admin;
GRANT INSERT, UPDATE ON OBJECT::heads.transfer_sets TO heads_admin;
GRANT INSERT, UPDATE ON OBJECT::heads.transfer_rows TO heads_admin;
GRANT UPDATE (owner_sid, owner_user) ON OBJECT::heads.embedding_sets TO heads_admin;
GO

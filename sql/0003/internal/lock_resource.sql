-- heads.lock_resource(): the application-lock resource of a set or head. sp_getapplock compares
-- resources in binary, case-sensitively whatever the collation (Microsoft Learn,
-- sp_getapplock, "@Resource"), while the tables find names under the database collation: so
-- the name is lower-cased here, and 'Reviews' and 'reviews' share one lock (issue 10, point
-- 10). Names are ASCII (heads.assert_name), so LOWER is the same under every collation.
CREATE OR ALTER FUNCTION heads.lock_resource(@kind nvarchar(16), @name nvarchar(128))
RETURNS nvarchar(255)
AS
BEGIN
    RETURN CONCAT(N'heads.', @kind, N':', LOWER(@name));
END;
GO

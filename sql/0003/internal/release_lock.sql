-- heads.release_lock: release every count of a Session-owned application lock this session
-- holds. A lock taken twice (a call cancelled before its CATCH ran, then run again on the
-- same pooled connection) must be released twice, or it outlives the call (point 11).
CREATE OR ALTER PROCEDURE heads.release_lock
    @kind nvarchar(16),
    @name nvarchar(128)
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @resource nvarchar(255) = heads.lock_resource(@kind, @name);
    WHILE APPLOCK_MODE(N'public', @resource, N'Session') <> N'NoLock'
        EXEC sys.sp_releaseapplock @Resource = @resource, @LockOwner = N'Session';
END;
GO

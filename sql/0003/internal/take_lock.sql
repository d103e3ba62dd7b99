-- heads.take_lock: the one place that takes sqlheads' application locks (sp_getapplock), so that
-- every procedure names the same resources (heads.lock_resource) and throws the same error.
--   set:<name>       Shared by embed, train and predict for their whole run; Exclusive by
--                    drop_set (which would otherwise delete rows they are writing: error 547)
--   embed:<name>     Exclusive by embed: two runs would send the same rows twice
--   head:<name>      Exclusive, in a short transaction, by train (writing a version), deploy,
--                    roll_back and drop_head: version numbers and deployments stay in order
--   head.use:<name>  Shared by predict for its whole run; Exclusive by drop_head
-- A Session lock this session still holds from a cancelled call is released first (point 11).
-- Errors: 50016 (not granted within @timeout_ms).
CREATE OR ALTER PROCEDURE heads.take_lock
    @kind nvarchar(16),
    @name nvarchar(128),
    @mode nvarchar(32),
    @owner nvarchar(32),
    @timeout_ms int
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @resource nvarchar(255) = heads.lock_resource(@kind, @name);
    DECLARE @result int;
    DECLARE @message nvarchar(2048);
    IF @owner = N'Session'
        EXEC heads.release_lock @kind = @kind, @name = @name;
    EXEC @result = sys.sp_getapplock
        @Resource = @resource, @LockMode = @mode, @LockOwner = @owner, @LockTimeout = @timeout_ms;
    IF @result < 0
    BEGIN
        SET @message = CONCAT(
            @kind, N' ''', @name, N''' is in use by another session (an ', @mode,
            N' lock was not granted within ', @timeout_ms, N' ms): wait for that session to ',
            N'finish and run this again, or pass a larger @lock_timeout_ms'
        );
        THROW 50016, @message, 1;
    END;
END;
GO

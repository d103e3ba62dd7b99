-- heads.cache_dir(): the folder where the Python runtime caches encoders by sha256, so that an
-- encoder's bytes cross into Python once per server, not once per call. The folder must be
-- writable by the external-script sandbox: on Linux it must be listed in
-- `mssql-conf set extensibility datadirectories`; on Windows grant "ALL APPLICATION PACKAGES"
-- modify rights on it. Change the paths here (CREATE OR ALTER) to move the cache.
CREATE OR ALTER FUNCTION heads.cache_dir()
RETURNS nvarchar(400)
AS
BEGIN
    DECLARE @platform nvarchar(256);
    SELECT @platform = host_platform FROM sys.dm_os_host_info;
    RETURN CASE
        WHEN @platform = N'Windows' THEN N'C:\ProgramData\sqlheads\cache'
        ELSE N'/var/opt/mssql/sqlheads/cache'
    END;
END;
GO

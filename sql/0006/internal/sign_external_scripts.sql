-- heads.sign_external_scripts: least privilege by module signing (issue 10, point 17; Microsoft
-- Learn, "Signing Stored Procedures in SQL Server", ADD SIGNATURE, CREATE CERTIFICATE).
-- Analysts get EXECUTE on the verbs and no EXECUTE ANY EXTERNAL SCRIPT, so they cannot run
-- Python of their own. The internal procedures that call sp_execute_external_script (fixed
-- scripts that only call sqlheads.procedures, and no dynamic SQL) are signed with the
-- certificate heads_external_script, whose user is the one principal granted EXECUTE ANY
-- EXTERNAL SCRIPT; inside a signed module SQL Server adds that user's permissions to the
-- caller's. Altering a module drops its signature, so the migrations run this after every
-- upgrade and downgrade. Each run replaces the certificate: a random password, and the
-- private key removed once the modules are signed, so no one (dbo included) can sign another
-- module with it. @remove = 1 only removes the signatures, the user and the certificate.
-- Revision 0006 (issue 19, point 4): the statement lists are built by STRING_AGG; Microsoft
-- documents that SELECT @v = @v + ... over rows can return a partial list (a module left
-- unsigned).
-- Run by the migrations (db_owner); no role may execute it.
CREATE OR ALTER PROCEDURE heads.sign_external_scripts
    @remove bit = 0
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    DECLARE @drop nvarchar(max);
    DECLARE @create nvarchar(max);
    DECLARE @sign nvarchar(max);
    DECLARE @password nvarchar(128);
    -- The pattern is built, so that this module's own text does not match it.
    DECLARE @calls_python nvarchar(100) = N'%EXEC sys.' + N'sp_execute_external_script%';

    SELECT
        @drop = STRING_AGG(
            CONVERT(
                nvarchar(max),
                N'DROP SIGNATURE FROM ' + QUOTENAME(OBJECT_SCHEMA_NAME(cp.major_id)) + N'.'
                + QUOTENAME(OBJECT_NAME(cp.major_id)) + N' BY CERTIFICATE heads_external_script;'
            ),
            N' '
        )
    FROM sys.crypt_properties AS cp
    INNER JOIN sys.certificates AS c ON cp.thumbprint = c.thumbprint
    WHERE c.name = N'heads_external_script' AND cp.class = 1;
    IF @drop IS NOT NULL EXEC sys.sp_executesql @drop;
    IF DATABASE_PRINCIPAL_ID(N'heads_external_script') IS NOT NULL
        DROP USER heads_external_script;
    -- DROP/ALTER CERTIFICATE run as dynamic SQL only because sqlfluff's tsql grammar lacks them.
    IF CERT_ID(N'heads_external_script') IS NOT NULL
        EXEC sys.sp_executesql N'DROP CERTIFICATE heads_external_script;';
    IF @remove = 1 RETURN;

    SET @password = CONCAT(NEWID(), N'-Aa1!-', NEWID());
    SET @create = CONCAT(
        N'CREATE CERTIFICATE heads_external_script ENCRYPTION BY PASSWORD = ',
        QUOTENAME(@password, N''''),
        N' WITH SUBJECT = N''sqlheads: runs the fixed Python of heads procedures'', ',
        N'EXPIRY_DATE = ''20991231'';'
    );
    EXEC sys.sp_executesql @create;
    CREATE USER heads_external_script FROM CERTIFICATE heads_external_script;
    GRANT EXECUTE ANY EXTERNAL SCRIPT TO heads_external_script;
    SELECT
        @sign = STRING_AGG(
            CONVERT(
                nvarchar(max),
                CONCAT(
                    N'ADD SIGNATURE TO ', QUOTENAME(OBJECT_SCHEMA_NAME(m.object_id)), N'.',
                    QUOTENAME(OBJECT_NAME(m.object_id)), N' BY CERTIFICATE heads_external_script ',
                    N'WITH PASSWORD = ', QUOTENAME(@password, N''''), N';'
                )
            ),
            N' '
        )
    FROM sys.sql_modules AS m
    WHERE
        OBJECT_SCHEMA_NAME(m.object_id) = N'heads'
        AND m.object_id <> @@PROCID
        AND m.[definition] LIKE @calls_python;
    IF @sign IS NOT NULL EXEC sys.sp_executesql @sign;
    EXEC sys.sp_executesql N'ALTER CERTIFICATE heads_external_script REMOVE PRIVATE KEY;';
END;
GO

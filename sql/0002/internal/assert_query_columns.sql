-- heads.assert_query_columns: THROW 50003 unless the caller's query compiles and its first
-- result set has every column named in @needed (comma-separated). The query is only described
-- (sys.dm_exec_describe_first_result_set), never run, and with the caller's permissions.
CREATE OR ALTER PROCEDURE heads.assert_query_columns
    @what nvarchar(32),
    @query nvarchar(max),
    @needed nvarchar(400)
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @message nvarchar(2048);
    DECLARE @problem nvarchar(2048);
    DECLARE @returned nvarchar(2048);
    DECLARE @missing nvarchar(2048);
    IF @query IS NULL OR LTRIM(RTRIM(@query)) = N''
    BEGIN
        SET @message = CONCAT(N'the ', @what, N' query is empty: pass a SELECT statement');
        THROW 50003, @message, 1;
    END;
    SELECT TOP (1) @problem = d.error_message
    FROM sys.dm_exec_describe_first_result_set(@query, NULL, 0) AS d
    WHERE d.error_number IS NOT NULL;
    IF @problem IS NOT NULL
    BEGIN
        SET @message = CONCAT(
            N'the ', @what, N' query cannot run: ', @problem, N' Check it runs on its own first'
        );
        THROW 50003, @message, 1;
    END;
    SELECT @returned = STRING_AGG(d.name, N', ') WITHIN GROUP (ORDER BY d.column_ordinal)
    FROM sys.dm_exec_describe_first_result_set(@query, NULL, 0) AS d;
    SELECT @missing = STRING_AGG(TRIM(n.value), N', ')
    FROM STRING_SPLIT(@needed, N',') AS n
    WHERE NOT EXISTS (
        SELECT 1
        FROM sys.dm_exec_describe_first_result_set(@query, NULL, 0) AS d
        WHERE d.name = TRIM(n.value)
    );
    IF @missing IS NOT NULL
    BEGIN
        SET @message = CONCAT(
            N'the ', @what, N' query must return columns ', @needed, N'; it is missing ',
            @missing, N' (it returned: ', COALESCE(@returned, N'nothing'),
            N'): alias them, e.g. SELECT id AS item_key, ...'
        );
        THROW 50003, @message, 1;
    END;
END;
GO

-- heads.assert_query_columns: THROW 50003 unless the caller's query compiles, its first result
-- set has every column named in @needed (comma-separated), and it still compiles as the derived
-- table heads.stage_query wraps it in. The query is only described
-- (sys.dm_exec_describe_first_result_set), never run, and with the caller's permissions.
-- Revision 0007: the wrapped form is described too, so that an ORDER BY without TOP (Msg 1033),
-- an unnamed column (8155) or a name used twice (8156) is refused here, with the fix, instead of
-- failing once staged; and the column lists are aggregated as nvarchar(max) (STRING_AGG over
-- sysname is capped at 8,000 bytes: Msg 9829 for a wide SELECT *).
-- Revision 0008: a query that compiles alone but not as a derived table for another reason (a
-- WITH before it, an OPTION or INTO clause) was told to "check it runs on its own first",
-- though it does; it is now told what cannot stand inside FROM (...) (the fourth audit,
-- finding 9).
CREATE OR ALTER PROCEDURE heads.assert_query_columns
    @what nvarchar(32),
    @query nvarchar(max),
    @needed nvarchar(400)
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @message nvarchar(2048);
    DECLARE @problem nvarchar(2048);
    DECLARE @problem_number int;
    DECLARE @returned nvarchar(max);
    DECLARE @missing nvarchar(max);
    DECLARE @wrapped nvarchar(max);
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
    SELECT
        @returned = STRING_AGG(CONVERT(nvarchar(max), d.name), N', ')
            WITHIN GROUP (ORDER BY d.column_ordinal)
    FROM sys.dm_exec_describe_first_result_set(@query, NULL, 0) AS d;
    SELECT @missing = STRING_AGG(CONVERT(nvarchar(max), TRIM(n.value)), N', ')
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
    -- The derived table heads.stage_query makes of it (the same trimming).
    SET @wrapped = CONCAT(
        N'SELECT caller_query.* FROM (', TRIM(NCHAR(9) + NCHAR(10) + NCHAR(13) + N' ;' FROM @query),
        NCHAR(10), N') AS caller_query'
    );
    SELECT TOP (1)
        @problem_number = d.error_number,
        @problem = d.error_message
    FROM sys.dm_exec_describe_first_result_set(@wrapped, NULL, 0) AS d
    WHERE d.error_number IS NOT NULL;
    IF @problem IS NOT NULL
    BEGIN
        SET @message = CONCAT(
            N'the ', @what, N' query cannot be read as a derived table: ', @problem, N' ',
            CASE @problem_number
                WHEN 1033 THEN N'Drop its ORDER BY (the order of the rows does not matter here).'
                WHEN 8155 THEN N'Name every column, e.g. SELECT LEN(body) AS body_length.'
                WHEN 8156 THEN N'Give every column its own name.'
                ELSE CONCAT(
                    N'It runs on its own (it was described alone above) but must stand inside ',
                    N'FROM (...) as one SELECT: write a WITH (common table expression) as a ',
                    N'subquery, and leave out OPTION (...) and INTO.'
                )
            END
        );
        THROW 50003, @message, 1;
    END;
END;
GO

-- heads.stage_query: run a caller's query (@source, @labels, @keys) once, into the calling
-- procedure's temp table @into, with the caller's own permissions: it is dynamic SQL in an
-- unsigned module, so neither ownership chaining nor the certificate of
-- heads.sign_external_scripts reaches it. @into and @columns are constants of the calling
-- procedure, never a caller's value. Errors: 50003 (heads.assert_query_columns).
CREATE OR ALTER PROCEDURE heads.stage_query
    @what nvarchar(32),
    @query nvarchar(max),
    @columns nvarchar(400),
    @into sysname
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @select_list nvarchar(max);
    DECLARE @stage nvarchar(max);
    EXEC heads.assert_query_columns @what = @what, @query = @query, @needed = @columns;
    SELECT @select_list = STRING_AGG(N'caller_query.' + QUOTENAME(TRIM(c.value)), N', ')
        WITHIN GROUP (ORDER BY c.ordinal)
    FROM STRING_SPLIT(@columns, N',', 1) AS c;
    SET @stage = CONCAT(
        N'INSERT INTO ', @into, N' (', @columns, N') SELECT ', @select_list, N' FROM (',
        TRIM(NCHAR(9) + NCHAR(10) + NCHAR(13) + N' ;' FROM @query), NCHAR(10),
        N') AS caller_query;'
    );
    EXEC sys.sp_executesql @stage;
END;
GO

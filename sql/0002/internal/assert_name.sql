-- heads.assert_name: THROW 50002 unless @name follows sqlheads' name rule, the same as
-- validate_name() in python/sqlheads/store/repository.py: a letter or underscore, then up to 127
-- letters, digits, underscores, dots or hyphens (ASCII; compared in a binary collation).
CREATE OR ALTER PROCEDURE heads.assert_name
    @kind nvarchar(32),
    @name nvarchar(4000)
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @message nvarchar(2048);
    IF
        @name IS NULL
        OR DATALENGTH(@name) = 0
        OR DATALENGTH(@name) > 256
        OR @name COLLATE Latin1_General_BIN2 NOT LIKE N'[A-Za-z_]%'
        OR @name COLLATE Latin1_General_BIN2 LIKE N'%[^A-Za-z0-9_.-]%'
    BEGIN
        SET @message = CONCAT(
            @kind, N' name ', COALESCE(N'''' + LEFT(@name, 200) + N'''', N'NULL'),
            N' is not allowed: use a letter or underscore followed by up to 127 letters, ',
            N'digits, underscores, dots or hyphens (e.g. review_quality)'
        );
        THROW 50002, @message, 1;
    END;
END;
GO

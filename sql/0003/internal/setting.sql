-- heads.setting: a text parameter as Python decides it. heads.settings is written by every
-- migration from sqlheads.procedures.SETTINGS, so no default, choice or reason is restated in
-- T-SQL (point 20). NULL gives the default; a value of a setting with choices comes back in
-- its canonical spelling ('WINDOW ' gives 'window', point 12), anything else is 50012.
-- Errors: 50012, 50014 (the setting is missing: the migrations have not run).
CREATE OR ALTER PROCEDURE heads.setting
    @name nvarchar(64),
    @value nvarchar(400) OUTPUT
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @default nvarchar(400);
    DECLARE @choices nvarchar(400);
    DECLARE @canonical nvarchar(400);
    DECLARE @message nvarchar(2048);
    SELECT
        @default = s.default_value,
        @choices = s.choices
    FROM heads.settings AS s
    WHERE s.name = @name;
    IF @@ROWCOUNT = 0
    BEGIN
        SET @message = CONCAT(
            N'heads.settings has no row ''', @name, N''': run the migrations (sqlheads init)'
        );
        THROW 50014, @message, 1;
    END;
    IF @value IS NULL
        SET @value = @default;
    ELSE IF @choices IS NOT NULL
    BEGIN
        SELECT @canonical = c.value
        FROM STRING_SPLIT(@choices, N',') AS c
        WHERE LOWER(c.value) = LOWER(TRIM(@value));
        IF @canonical IS NULL
        BEGIN
            SET @message = CONCAT(
                @name, N' ''', @value, N''' is not one of ', REPLACE(@choices, N',', N', '),
                N': pass one of them'
            );
            THROW 50012, @message, 1;
        END;
        SET @value = @canonical;
    END;
END;
GO

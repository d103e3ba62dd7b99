-- heads.setting_int: an int parameter as Python decides it (heads.settings, see heads.setting):
-- NULL gives the default; a value outside the bounds is 50012, with the bounds.
-- Errors: 50012, 50014 (the setting is missing: the migrations have not run).
CREATE OR ALTER PROCEDURE heads.setting_int
    @name nvarchar(64),
    @value int OUTPUT
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @default int;
    DECLARE @minimum bigint;
    DECLARE @maximum bigint;
    DECLARE @message nvarchar(2048);
    SELECT
        @default = TRY_CONVERT(int, s.default_value),
        @minimum = s.minimum,
        @maximum = s.maximum
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
    ELSE IF @value < @minimum OR @value > @maximum
    BEGIN
        SET @message = CONCAT(
            @name, N' ', @value, N' is out of range: pass a value between ', @minimum,
            N' and ', @maximum
        );
        THROW 50012, @message, 1;
    END;
END;
GO

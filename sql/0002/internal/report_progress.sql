-- heads.report_progress: one line in SSMS's Messages tab, sent at once (RAISERROR ... WITH
-- NOWAIT, severity 0): rows done of total, rows per second, and the time left.
CREATE OR ALTER PROCEDURE heads.report_progress
    @what nvarchar(64),
    @done bigint,
    @total bigint,
    @started datetime2(3)
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @seconds float = DATEDIFF_BIG(MILLISECOND, @started, SYSUTCDATETIME()) / 1000.0;
    DECLARE @rate float = CASE WHEN @seconds > 0 THEN @done / @seconds END;
    DECLARE @left nvarchar(32) = CASE
        WHEN @rate > 0 AND @total >= @done
            THEN CONVERT(nvarchar(32), CAST((@total - @done) / @rate AS bigint)) + N' s'
        ELSE N'?'
    END;
    DECLARE @line nvarchar(400) = CONCAT(
        @what, N': ', @done, N' of ', COALESCE(CONVERT(nvarchar(32), @total), N'?'),
        N' rows, ', COALESCE(CONVERT(nvarchar(32), CAST(@rate AS decimal(18, 1))), N'?'),
        N' rows/s, ', @left, N' left'
    );
    RAISERROR (N'%s', 0, 1, @line) WITH NOWAIT;
END;
GO

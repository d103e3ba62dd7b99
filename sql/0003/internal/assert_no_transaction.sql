-- heads.assert_no_transaction: THROW 50017 when a verb is called inside an open transaction.
-- The verbs commit their own short transactions; inside a caller's transaction those commits
-- would be nested no-ops and every lock would be held to the caller's end. Clients without
-- autocommit (pyodbc's and SQLAlchemy's default) run in implicit-transaction mode, so each
-- verb also runs SET IMPLICIT_TRANSACTIONS OFF, which lasts until the procedure returns
-- (Microsoft Learn, SET IMPLICIT_TRANSACTIONS; "SET statements" in stored procedures).
CREATE OR ALTER PROCEDURE heads.assert_no_transaction
    @procedure nvarchar(128)
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @message nvarchar(2048);
    IF @@TRANCOUNT > 0
    BEGIN
        SET @message = CONCAT(
            @procedure, N' commits its own transactions but was called inside an open one ',
            N'(@@TRANCOUNT = ', @@TRANCOUNT, N'): COMMIT or ROLLBACK first, or turn autocommit ',
            N'on in the client (pyodbc: autocommit=True; SQLAlchemy: isolation_level=''AUTOCOMMIT'')'
        );
        THROW 50017, @message, 1;
    END;
END;
GO

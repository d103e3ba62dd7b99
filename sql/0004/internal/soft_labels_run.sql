-- heads.soft_labels_run: a caller's soft labels, as heads.distill staged them in #soft_rows
-- (item_key, and the whole row as JSON, so that T-SQL need not know the class columns),
-- turned by Python into one float32 logit per class (sqlheads.procedures.soft_labels): returns
-- item_key, logits and classes_json (the classes in the logits' order, the same on every row).
-- Signed by heads.sign_external_scripts.
CREATE OR ALTER PROCEDURE heads.soft_labels_run
    @error_number int OUTPUT,
    @error_message nvarchar(2048) OUTPUT
AS
BEGIN
    SET NOCOUNT ON;
    EXEC sys.sp_execute_external_script
        @language = N'Python',
        @script = N'
from sqlheads.procedures import sql_server_call
OutputDataSet, error_number, error_message = sql_server_call("soft_labels", InputDataSet)
',
        @input_data_1 = N'SELECT item_key, row_json FROM #soft_rows',
        @params = N'@error_number int OUTPUT, @error_message nvarchar(2048) OUTPUT',
        @error_number = @error_number OUTPUT,
        @error_message = @error_message OUTPUT
    WITH RESULT SETS ((
        item_key nvarchar(450),
        logits varbinary(max),
        classes_json nvarchar(max)
    ));
END;
GO

-- heads.predict_batch: one batch of heads.predict through Python. Reads #predict_batch
-- (item_key, vector), which heads.predict fills; returns sqlheads.procedures.PREDICT_OUTPUT.
-- A head is a few kilobytes: its blob travels with every batch and is cached by sha256.
CREATE OR ALTER PROCEDURE heads.predict_batch
    @model_sha256 char(64),
    @model_blob varbinary(max),
    @error_number int OUTPUT,
    @error_message nvarchar(2048) OUTPUT
AS
BEGIN
    SET NOCOUNT ON;
    EXEC sys.sp_execute_external_script
        @language = N'Python',
        @script = N'
from sqlheads.procedures import sql_server_call
OutputDataSet, error_number, error_message = sql_server_call(
    "predict", InputDataSet, model_sha256=model_sha256, model_blob=model_blob,
)
',
        @input_data_1 = N'SELECT item_key, vector FROM #predict_batch',
        @params = N'@model_sha256 char(64), @model_blob varbinary(max),
            @error_number int OUTPUT, @error_message nvarchar(2048) OUTPUT',
        @model_sha256 = @model_sha256,
        @model_blob = @model_blob,
        @error_number = @error_number OUTPUT,
        @error_message = @error_message OUTPUT
    WITH RESULT SETS ((
        item_key nvarchar(450),
        label nvarchar(400),
        score float,
        probabilities_json nvarchar(max)
    ));
END;
GO

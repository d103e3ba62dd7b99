-- heads.predict_batch: one batch of heads.predict through Python. Reads #predict_batch
-- (item_key, vector, text), which heads.predict fills with the input the model's kind reads;
-- returns sqlheads.procedures.PREDICT_OUTPUT. Python dispatches on @model_kind
-- (engine/kinds.py). A model's blob travels with every batch and is cached by sha256 (a head
-- is a few kilobytes, a word student about 4 MB).
CREATE OR ALTER PROCEDURE heads.predict_batch
    @model_sha256 char(64),
    @model_blob varbinary(max),
    @model_kind nvarchar(32),
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
    kind=model_kind,
)
',
        @input_data_1 = N'SELECT item_key, vector, text FROM #predict_batch',
        @params = N'@model_sha256 char(64), @model_blob varbinary(max), @model_kind nvarchar(32),
            @error_number int OUTPUT, @error_message nvarchar(2048) OUTPUT',
        @model_sha256 = @model_sha256,
        @model_blob = @model_blob,
        @model_kind = @model_kind,
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

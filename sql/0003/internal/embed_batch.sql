-- heads.embed_batch: one batch of heads.embed through Python. Reads #embed_batch (item_key,
-- text, stored_sha256), which heads.embed fills; returns sqlheads.procedures.EMBED_OUTPUT,
-- typed as RESULT_TYPES says (a rejected row has vector 0x and windows 0; only rows without a
-- reject_reason are stored). The encoder is named by its sha256; its bytes are passed only
-- when Python's cache lacks it (it then answers 50009 and heads.embed calls again with them).
-- Python chooses the cache folder itself. Signed by heads.sign_external_scripts: analysts may
-- run this fixed script through heads.embed, not Python of their own.
CREATE OR ALTER PROCEDURE heads.embed_batch
    @encoder_sha256 char(64),
    @long_text varchar(16),
    @batch_size int,
    @threads int,
    @encoder_onnx varbinary(max),
    @tokenizer_json nvarchar(max),
    @dim int,
    @max_length int,
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
    "embed", InputDataSet, encoder_sha256=encoder_sha256, long_text=long_text,
    batch_size=batch_size, threads=threads, encoder_onnx=encoder_onnx,
    tokenizer_json=tokenizer_json, dim=dim, max_length=max_length,
)
',
        @input_data_1 = N'SELECT item_key, text, stored_sha256 FROM #embed_batch',
        @params = N'@encoder_sha256 char(64), @long_text varchar(16), @batch_size int,
            @threads int, @encoder_onnx varbinary(max), @tokenizer_json nvarchar(max), @dim int,
            @max_length int, @error_number int OUTPUT, @error_message nvarchar(2048) OUTPUT',
        @encoder_sha256 = @encoder_sha256,
        @long_text = @long_text,
        @batch_size = @batch_size,
        @threads = @threads,
        @encoder_onnx = @encoder_onnx,
        @tokenizer_json = @tokenizer_json,
        @dim = @dim,
        @max_length = @max_length,
        @error_number = @error_number OUTPUT,
        @error_message = @error_message OUTPUT
    WITH RESULT SETS ((
        item_key nvarchar(450),
        text_sha256 char(64),
        vector varbinary(max),
        windows int,
        reject_reason nvarchar(400)
    ));
END;
GO

-- heads.teach_run: the teaching of heads.distill @teacher_head through Python. Reads
-- #teach_input (item_key, text, label, teacher_vector, teacher_text_sha256), which heads.distill
-- fills; returns one row per student row with the teacher's logits (from the vector its set
-- stored for the same text, else scored now) and one per transfer row Python made from the
-- rows the student may learn from (never a held-out row) and scored (item_key, text, logits,
-- origin_key, transfer). Python applies its own default to every NULL parameter.
-- Signed by heads.sign_external_scripts.
CREATE OR ALTER PROCEDURE heads.teach_run
    @teacher_blob varbinary(max),
    @teacher_sha256 char(64),
    @teacher_kind nvarchar(32),
    @encoder_sha256 char(64),
    @encoder_onnx varbinary(max),
    @tokenizer_json nvarchar(max),
    @dim int,
    @max_length int,
    @long_text nvarchar(16),
    @student_tokenizer_json nvarchar(max),
    @student_encoder_onnx varbinary(max),
    @transfer_rows int,
    @test_fraction float,
    @seed int,
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
    "teach", InputDataSet, teacher_blob=teacher_blob, teacher_sha256=teacher_sha256,
    teacher_kind=teacher_kind, encoder_sha256=encoder_sha256, encoder_onnx=encoder_onnx,
    tokenizer_json=tokenizer_json, dim=dim, max_length=max_length, long_text=long_text,
    student_tokenizer_json=student_tokenizer_json, student_encoder_onnx=student_encoder_onnx,
    transfer_rows=transfer_rows, test_fraction=test_fraction, seed=seed,
)
',
        @input_data_1 = N'SELECT item_key, text, label, teacher_vector, teacher_text_sha256 FROM #teach_input',
        @params = N'@teacher_blob varbinary(max), @teacher_sha256 char(64),
            @teacher_kind nvarchar(32), @encoder_sha256 char(64), @encoder_onnx varbinary(max),
            @tokenizer_json nvarchar(max), @dim int, @max_length int, @long_text nvarchar(16),
            @student_tokenizer_json nvarchar(max), @student_encoder_onnx varbinary(max),
            @transfer_rows int, @test_fraction float, @seed int,
            @error_number int OUTPUT, @error_message nvarchar(2048) OUTPUT',
        @teacher_blob = @teacher_blob,
        @teacher_sha256 = @teacher_sha256,
        @teacher_kind = @teacher_kind,
        @encoder_sha256 = @encoder_sha256,
        @encoder_onnx = @encoder_onnx,
        @tokenizer_json = @tokenizer_json,
        @dim = @dim,
        @max_length = @max_length,
        @long_text = @long_text,
        @student_tokenizer_json = @student_tokenizer_json,
        @student_encoder_onnx = @student_encoder_onnx,
        @transfer_rows = @transfer_rows,
        @test_fraction = @test_fraction,
        @seed = @seed,
        @error_number = @error_number OUTPUT,
        @error_message = @error_message OUTPUT
    WITH RESULT SETS ((
        item_key nvarchar(450),
        text nvarchar(max),
        logits varbinary(max),
        origin_key nvarchar(450),
        transfer int
    ));
END;
GO

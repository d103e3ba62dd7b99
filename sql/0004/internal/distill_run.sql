-- heads.distill_run: the distillation of heads.distill through Python. Reads #distill_input
-- (item_key, label, logits, text, vector, in_transfer), which heads.distill fills; returns
-- sqlheads.procedures.DISTILL_OUTPUT (one row). Python picks the input its student kind reads
-- (text or vector), refuses an unknown kind (50022), holds out the split heads.train makes
-- from the same labels and seed, and applies its own default to every NULL parameter.
-- Signed by heads.sign_external_scripts.
CREATE OR ALTER PROCEDURE heads.distill_run
    @student nvarchar(32),
    @teacher_classes_json nvarchar(max),
    @dim int,
    @tokenizer_json nvarchar(max),
    @encoder_onnx varbinary(max),
    @temperature float,
    @gold_weight float,
    @epochs int,
    @lr float,
    @batch_size int,
    @test_fraction float,
    @seed int,
    @deploy varchar(16),
    @deployed_macro_f1 float,
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
    "distill", InputDataSet, student=student, teacher_classes_json=teacher_classes_json,
    dim=dim, tokenizer_json=tokenizer_json, encoder_onnx=encoder_onnx,
    temperature=temperature, gold_weight=gold_weight, epochs=epochs, lr=lr,
    batch_size=batch_size, test_fraction=test_fraction, seed=seed, deploy=deploy,
    deployed_macro_f1=deployed_macro_f1,
)
',
        @input_data_1 = N'SELECT item_key, label, logits, text, vector, in_transfer FROM #distill_input',
        @params = N'@student nvarchar(32), @teacher_classes_json nvarchar(max), @dim int,
            @tokenizer_json nvarchar(max), @encoder_onnx varbinary(max), @temperature float,
            @gold_weight float, @epochs int, @lr float, @batch_size int, @test_fraction float,
            @seed int, @deploy varchar(16), @deployed_macro_f1 float,
            @error_number int OUTPUT, @error_message nvarchar(2048) OUTPUT',
        @student = @student,
        @teacher_classes_json = @teacher_classes_json,
        @dim = @dim,
        @tokenizer_json = @tokenizer_json,
        @encoder_onnx = @encoder_onnx,
        @temperature = @temperature,
        @gold_weight = @gold_weight,
        @epochs = @epochs,
        @lr = @lr,
        @batch_size = @batch_size,
        @test_fraction = @test_fraction,
        @seed = @seed,
        @deploy = @deploy,
        @deployed_macro_f1 = @deployed_macro_f1,
        @error_number = @error_number OUTPUT,
        @error_message = @error_message OUTPUT
    WITH RESULT SETS ((
        classes_json nvarchar(max),
        params_json nvarchar(max),
        metrics_json nvarchar(max),
        loss_curve_json nvarchar(max),
        accuracy float,
        macro_f1 float,
        rows_train int,
        rows_test int,
        seconds float,
        blob varbinary(max),
        sha256 char(64),
        onnx varbinary(max),
        deploy bit,
        deploy_reason nvarchar(200),
        kind nvarchar(32),
        parameters int,
        teacher_accuracy float,
        rows_without_input int
    ));
END;
GO

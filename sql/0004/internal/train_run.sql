-- heads.train_run: the training of heads.train through Python. Reads #train_input (item_key,
-- label, vector), which heads.train fills; returns sqlheads.procedures.TRAIN_OUTPUT (one row).
-- Every hyper-parameter may be NULL: Python applies its own default (HeadParams), validates
-- the values and the deploy policy, and returns the deploy decision and its reason.
-- Signed by heads.sign_external_scripts.
CREATE OR ALTER PROCEDURE heads.train_run
    @dim int,
    @hidden int,
    @epochs int,
    @lr float,
    @weight_decay float,
    @batch_size int,
    @dropout float,
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
    "train", InputDataSet, dim=dim, hidden=hidden, epochs=epochs, lr=lr,
    weight_decay=weight_decay, batch_size=batch_size, dropout=dropout,
    test_fraction=test_fraction, seed=seed, deploy=deploy, deployed_macro_f1=deployed_macro_f1,
)
',
        @input_data_1 = N'SELECT item_key, label, vector FROM #train_input',
        @params = N'@dim int, @hidden int, @epochs int, @lr float, @weight_decay float,
            @batch_size int, @dropout float, @test_fraction float, @seed int,
            @deploy varchar(16), @deployed_macro_f1 float,
            @error_number int OUTPUT, @error_message nvarchar(2048) OUTPUT',
        @dim = @dim,
        @hidden = @hidden,
        @epochs = @epochs,
        @lr = @lr,
        @weight_decay = @weight_decay,
        @batch_size = @batch_size,
        @dropout = @dropout,
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
        parameters int
    ));
END;
GO

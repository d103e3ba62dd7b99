-- heads.decide_run: Python's deploy decision again (sqlheads.procedures.decide), for a training
-- whose head got another deployed version while it trained: heads.train trains outside its
-- write transaction, and T-SQL never restates the policy. Reads #decide (new_macro_f1,
-- deployed_macro_f1); returns one row (deploy, deploy_reason). Signed by
-- heads.sign_external_scripts.
CREATE OR ALTER PROCEDURE heads.decide_run
    @deploy varchar(16),
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
    "decide", InputDataSet, deploy=deploy,
)
',
        @input_data_1 = N'SELECT new_macro_f1, deployed_macro_f1 FROM #decide',
        @params = N'@deploy varchar(16),
            @error_number int OUTPUT, @error_message nvarchar(2048) OUTPUT',
        @deploy = @deploy,
        @error_number = @error_number OUTPUT,
        @error_message = @error_message OUTPUT
    WITH RESULT SETS ((
        deploy bit,
        deploy_reason nvarchar(200)
    ));
END;
GO

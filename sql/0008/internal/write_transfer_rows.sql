-- heads.write_transfer_rows: a teacher version's cached transfer set (revision 0008;
-- sqlheads.store.transfer_cache): the set of @model_id and @recipe_key, created if missing
-- (with @recipe_json and @classes_json), its rows_max recorded when @rows_max is not NULL, and
-- the caller's #transfer_rows (ordinal, origin_key, how, text, logits) added, in one
-- transaction; @transfer_set_id: the set. A teacher version dropped meanwhile is 50028.
-- Scope as heads.add_version: a sidecar passes the teacher job it holds (heads.assert_job_held)
-- and writes only the transfer rows of that job's teacher (its head plus heads.settings'
-- teacher.suffix) on that job's set (else 50072); heads_admin passes @job_id NULL. The sidecar
-- holds SELECT alone on heads.transfer_sets and heads.transfer_rows: with INSERT it could put
-- rows into another teacher's cache, which that teacher's next students would learn from.
-- Errors: 50028, 50072.
CREATE OR ALTER PROCEDURE heads.write_transfer_rows
    @job_id int,
    @worker nvarchar(200),
    @model_id int,
    @recipe_key varchar(64),
    @recipe_json nvarchar(max),
    @classes_json nvarchar(max),
    @rows_max int = NULL,
    @transfer_set_id int OUTPUT
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    DECLARE @message nvarchar(2048);
    DECLARE @job_head nvarchar(128);
    DECLARE @job_set nvarchar(128);
    DECLARE @job_parameters nvarchar(max);
    DECLARE @requested_user nvarchar(128);
    DECLARE @suffix nvarchar(400);
    DECLARE @teacher_head nvarchar(256);
    EXEC heads.assert_job_held
        @job_id = @job_id,
        @worker = @worker,
        @kind = 'teacher',
        @head = @job_head OUTPUT,
        @set_name = @job_set OUTPUT,
        @parameters_json = @job_parameters OUTPUT,
        @requested_user = @requested_user OUTPUT;
    SET @transfer_set_id = NULL;
    BEGIN TRANSACTION;
    IF NOT EXISTS (SELECT 1 FROM heads.models AS m WITH (HOLDLOCK) WHERE m.model_id = @model_id)
    BEGIN
        SET @message = CONCAT(
            N'the teacher version ', COALESCE(CONVERT(nvarchar(12), @model_id), N'NULL'),
            N' was dropped while its transfer rows were scored: no student version was stored; ',
            N'train and deploy a teacher head again and re-run distill'
        );
        THROW 50028, @message, 1;
    END;
    IF @job_id IS NOT NULL
    BEGIN
        EXEC heads.setting @name = N'teacher.suffix', @value = @suffix OUTPUT;
        SET @teacher_head = CONCAT(@job_head, @suffix);
        IF NOT EXISTS (
            SELECT 1
            FROM heads.models AS m
            INNER JOIN heads.embedding_sets AS es ON m.set_id = es.set_id
            WHERE m.model_id = @model_id AND m.head = @teacher_head AND es.name = @job_set
        )
        BEGIN
            SET @message = CONCAT(
                N'job ', @job_id, N' writes the transfer rows of teacher ''', @teacher_head,
                N''' on set ''', @job_set, N''' only, not of version ', @model_id,
                N': a sidecar writes only what the job it holds asked for'
            );
            THROW 50072, @message, 1;
        END;
    END;
    SELECT @transfer_set_id = ts.transfer_set_id
    FROM heads.transfer_sets AS ts WITH (UPDLOCK, HOLDLOCK)
    WHERE ts.model_id = @model_id AND ts.recipe_key = @recipe_key;
    IF @transfer_set_id IS NULL
    BEGIN
        INSERT INTO heads.transfer_sets (model_id, recipe_key, recipe_json, classes_json)
        VALUES (@model_id, @recipe_key, @recipe_json, @classes_json);
        SET @transfer_set_id = SCOPE_IDENTITY();
    END;
    IF @rows_max IS NOT NULL
        UPDATE heads.transfer_sets
        SET rows_max = @rows_max
        WHERE transfer_set_id = @transfer_set_id;
    INSERT INTO heads.transfer_rows (transfer_set_id, ordinal, origin_key, how, text, logits)
    SELECT
        @transfer_set_id,
        r.ordinal,
        r.origin_key,
        r.how,
        r.text,
        r.logits
    FROM #transfer_rows AS r;
    COMMIT TRANSACTION;
END;
GO

-- heads.request_teacher: queue fine-tuning a teacher on a head's labels for the GPU sidecar,
-- then its soft labels for every row of the set and the students (@students: a comma list of
-- encoder and word; N'' for none), as `sqlheads request-teacher` does. @student_layers: the
-- transformer layers the encoder student keeps of @student_model's (NULL: all).
--
-- @labels (item_key, label) and @source (item_key, text; default: the set's stored source
-- query, for its author alone: heads.set_source) run once here, with the caller's own
-- permissions (heads.stage_query), and their rows
-- are captured into heads.job_inputs with the job, in one transaction: the sidecar reads those
-- rows and never runs a caller's query (revision 0006, issue 19). The job records who asked:
-- ORIGINAL_LOGIN() and the database user. The parameters are JSON built by
-- FOR JSON; a parameter left NULL is left out, and the sidecar's Python completes it with its
-- default (sqlheads.teacher_job.validate_teacher_request), so no default is restated here.
-- Keys are compared in BIN2, as heads.request_embed and the sidecar compare them: under a
-- case-insensitive collation 'A' and 'a' would merge (revision 0007). The job records the
-- requester's USER_SID() too (revision 0008): heads.jobs and heads.cancel_job compare it.
-- Result: job_id, head, set, parameters_json.
-- Errors: 50001, 50002, 50003, 50012, 50014, 50017, 50024, 50071 (see README); and any error of the
-- caller's queries (e.g. 229: the caller may not read a table they name).
CREATE OR ALTER PROCEDURE heads.request_teacher
    @head nvarchar(128),
    @set nvarchar(128),
    @labels nvarchar(max),
    @source nvarchar(max) = NULL,
    @model nvarchar(400) = NULL,
    @students nvarchar(100) = NULL,
    @student_model nvarchar(400) = NULL,
    @student_layers int = NULL,
    @deploy varchar(16) = NULL,
    @epochs int = NULL,
    @batch_size int = NULL,
    @lr float = NULL,
    @max_length int = NULL,
    @warmup_ratio float = NULL,
    @grad_accumulation int = NULL,
    @patience int = NULL,
    @compile varchar(8) = NULL,
    @precision varchar(8) = NULL,
    @seed int = NULL,
    @max_steps int = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SET IMPLICIT_TRANSACTIONS OFF;
    EXEC heads.assert_no_transaction @procedure = N'heads.request_teacher';
    SET XACT_ABORT ON;
    DECLARE @message nvarchar(2048);
    DECLARE @set_id int;
    DECLARE @text_source nvarchar(max);
    DECLARE @wanted_deploy nvarchar(400) = @deploy;
    DECLARE @max_attempts int;
    DECLARE @student_list nvarchar(max) = N'[]';
    DECLARE @parameters nvarchar(max);
    DECLARE @job_id int;
    DECLARE @duplicated int;
    BEGIN TRY
        EXEC heads.assert_name @kind = N'head', @name = @head;
        EXEC heads.assert_name @kind = N'set', @name = @set;
        IF @wanted_deploy IS NOT NULL
            EXEC heads.setting @name = N'deploy', @value = @wanted_deploy OUTPUT;
        EXEC heads.setting_int @name = N'jobs.max_attempts', @value = @max_attempts OUTPUT;
        SELECT @set_id = es.set_id
        FROM heads.embedding_sets AS es
        WHERE es.name = @set;
        IF @set_id IS NULL
        BEGIN
            SET @message = CONCAT(
                N'embedding set ''', @set, N''' does not exist: create it with EXEC heads.embed ',
                N'@set = N''', @set, N''', @source = N''SELECT ... AS item_key, ... AS text ...'''
            );
            THROW 50001, @message, 1;
        END;
        EXEC heads.set_source @set_id = @set_id, @source = @source, @query = @text_source OUTPUT;
        IF @text_source IS NULL
        BEGIN
            SET @message = CONCAT(
                N'set ''', @set, N''' has no source query to read text through: pass @source = ',
                N'N''SELECT ... AS item_key, ... AS text FROM ...'''
            );
            THROW 50024, @message, 1;
        END;
        CREATE TABLE #teacher_labels (
            item_key nvarchar(450) COLLATE Latin1_General_100_BIN2 NULL,
            label nvarchar(400) COLLATE DATABASE_DEFAULT NULL
        );
        CREATE TABLE #teacher_texts (
            item_key nvarchar(450) COLLATE Latin1_General_100_BIN2 NULL,
            text nvarchar(max) COLLATE DATABASE_DEFAULT NULL
        );
        EXEC heads.stage_query
            @what = N'labels', @query = @labels, @columns = N'item_key,label',
            @into = N'#teacher_labels';
        EXEC heads.stage_query
            @what = N'source', @query = @text_source, @columns = N'item_key,text',
            @into = N'#teacher_texts';
        IF
            EXISTS (SELECT 1 FROM #teacher_labels AS l WHERE l.item_key IS NULL)
            OR EXISTS (SELECT 1 FROM #teacher_texts AS t WHERE t.item_key IS NULL)
            THROW 50003,
                N'the labels or source query returned rows with a NULL item_key: filter them out',
                1;
        SELECT @duplicated = COUNT(*) - COUNT(DISTINCT l.item_key) FROM #teacher_labels AS l;
        IF @duplicated > 0
        BEGIN
            SET @message = CONCAT(
                @duplicated, N' item_key(s) appear more than once in the labels query: give ',
                N'each key one label (e.g. SELECT DISTINCT or GROUP BY)'
            );
            THROW 50012, @message, 1;
        END;

        SET @parameters = (
            SELECT
                @labels AS labels,
                @text_source AS source,
                @model AS model,
                @student_model AS student_model,
                @student_layers AS student_layers,
                @wanted_deploy AS deploy,
                @epochs AS epochs,
                @batch_size AS batch_size,
                @lr AS lr,
                @max_length AS max_length,
                @warmup_ratio AS warmup_ratio,
                @grad_accumulation AS grad_accumulation,
                @patience AS patience,
                @compile AS [compile],
                @precision AS [precision],
                @seed AS seed,
                @max_steps AS max_steps
            FOR JSON PATH, WITHOUT_ARRAY_WRAPPER
        );
        IF @students IS NOT NULL
        BEGIN
            -- A JSON array of the names (STRING_ESCAPE quotes them), aggregated in order.
            SELECT
                @student_list = CONCAT(
                    N'[',
                    STRING_AGG(
                        CONVERT(nvarchar(max), N'"' + STRING_ESCAPE(TRIM(s.value), 'json') + N'"'),
                        N','
                    ) WITHIN GROUP (ORDER BY s.ordinal),
                    N']'
                )
            FROM STRING_SPLIT(@students, N',', 1) AS s
            WHERE TRIM(s.value) <> N'';
            SET @parameters = JSON_MODIFY(@parameters, '$.students', JSON_QUERY(@student_list));
        END;

        BEGIN TRANSACTION;
        INSERT INTO heads.job_queue (
            kind, state, head, set_name, parameters_json, max_attempts, requested_by,
            requested_user, requested_sid
        )
        VALUES (
            'teacher', 'queued', @head, @set, @parameters, @max_attempts, ORIGINAL_LOGIN(),
            USER_NAME(), USER_SID()
        );
        SET @job_id = SCOPE_IDENTITY();
        -- Every source row with its label (NULL: unlabelled), and labelled keys without text
        -- (the job refuses those, naming one).
        INSERT INTO heads.job_inputs (job_id, item_key, label, text)
        SELECT
            @job_id,
            COALESCE(t.item_key, l.item_key),
            l.label,
            t.text
        FROM #teacher_texts AS t
        FULL OUTER JOIN #teacher_labels AS l ON t.item_key = l.item_key;
        COMMIT TRANSACTION;
        SELECT
            @job_id AS job_id,
            @head AS head,
            @set AS [set],
            @parameters AS parameters_json;
    END TRY
    BEGIN CATCH
        IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;
        THROW;
    END CATCH;
END;
GO

-- heads.distill: distil a teacher's soft labels into a student version of a head (a word-level
-- student on raw text, or a head on the set's stored vectors), as `sqlheads distill` does.
--
-- Soft labels come from @soft_labels (a caller's query returning item_key and one logit column
-- per class, named after the class), stored as teacher @teacher (default: the head's name and
-- the suffix in heads.settings) and replacing that teacher's earlier soft labels; or from a
-- teacher stored earlier (@teacher alone). A word student reads the rows' text through @source,
-- or the set's own last source query when the caller is its author (heads.set_source, revision
-- 0007: anyone else passes @source, or gets 50071). @transfer (a caller's query returning item_key)
-- restricts the rows distilled on. Or a head's deployed version teaches (@teacher_head, revision
-- 0007): heads.teach_run scores the student's rows (from the vectors the teacher's set stored
-- for the same text, else embedding them with the teacher's encoder) and @transfer_rows transfer
-- rows made from the rows the student may learn from (never a held-out row); its soft labels are
-- stored as teacher @teacher (default: <teacher head>.v<version>) naming that version, and the
-- version's disappearance meanwhile (a dropped teacher head) is refused with 50028. Here the
-- transfer rows are made and scored on every call; the embedded host caches them.
-- Every caller query runs once, with the caller's own
-- permissions (heads.stage_query). Python holds out the split heads.train makes from the same
-- labels and seed, never distils on it, refuses a @transfer that names it, and applies its
-- own default to every NULL parameter. Python works outside any transaction with a Shared lock
-- on the set; the teacher's soft labels are then written in a transaction of their own, and
-- the version in heads.write_version's short one. @deploy is read in any case (Python's
-- procedures.choice), as heads.train reads it.
-- Errors: 50001, 50002, 50003, 50004, 50005, 50006, 50012, 50014, 50016, 50017, 50020, 50021,
-- 50022, 50023, 50024, 50027, 50028, 50071 (see README).
CREATE OR ALTER PROCEDURE heads.distill
    @head nvarchar(128),
    @set nvarchar(128),
    @labels nvarchar(max),
    @student nvarchar(32) = NULL,
    @soft_labels nvarchar(max) = NULL,
    @teacher nvarchar(128) = NULL,
    @teacher_head nvarchar(128) = NULL,
    @transfer_rows int = NULL,
    @source nvarchar(max) = NULL,
    @transfer nvarchar(max) = NULL,
    @deploy varchar(16) = NULL,
    @temperature float = NULL,
    @gold_weight float = NULL,
    @epochs int = NULL,
    @lr float = NULL,
    @batch_size int = NULL,
    @test_fraction float = NULL,
    @seed int = NULL,
    @lock_timeout_ms int = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SET IMPLICIT_TRANSACTIONS OFF;
    EXEC heads.assert_no_transaction @procedure = N'heads.distill';
    SET XACT_ABORT ON;
    DECLARE @message nvarchar(2048);
    DECLARE @set_id int;
    DECLARE @text_query nvarchar(max);
    DECLARE @encoder_id int;
    DECLARE @encoder_name nvarchar(128);
    DECLARE @dim int;
    DECLARE @tokenizer_json nvarchar(max);
    DECLARE @encoder_onnx varbinary(max);
    DECLARE @suffix nvarchar(400);
    DECLARE @teacher_name nvarchar(128);
    DECLARE @teacher_id int;
    DECLARE @teacher_set_id int;
    DECLARE @teacher_classes_json nvarchar(max);
    DECLARE @teacher_model_id int;
    DECLARE @teacher_version int;
    DECLARE @teacher_kind nvarchar(32);
    DECLARE @teacher_blob varbinary(max);
    DECLARE @teacher_sha256 char(64);
    DECLARE @teacher_vectors_set_id int;
    DECLARE @teacher_long_text nvarchar(16);
    DECLARE @teacher_encoder_sha256 char(64);
    DECLARE @teacher_encoder_onnx varbinary(max);
    DECLARE @teacher_tokenizer_json nvarchar(max);
    DECLARE @teacher_dim int;
    DECLARE @teacher_max_length int;
    DECLARE @rows_wanted int;
    DECLARE @soft_query nvarchar(max);
    DECLARE @outside bigint;
    DECLARE @example nvarchar(450);
    DECLARE @deployed_model_id int;
    DECLARE @deployed_macro_f1 float;
    DECLARE @error_number int = 0;
    DECLARE @error_message nvarchar(2048);
    DECLARE @model_id int;
    DECLARE @deployed bit;
    DECLARE @locked bit = 0;
    BEGIN TRY
        EXEC heads.assert_name @kind = N'head', @name = @head;
        EXEC heads.assert_name @kind = N'set', @name = @set;
        EXEC heads.setting @name = N'teacher.suffix', @value = @suffix OUTPUT;
        IF @teacher_head IS NOT NULL
        BEGIN
            EXEC heads.assert_name @kind = N'head', @name = @teacher_head;
            IF @soft_labels IS NOT NULL
                THROW 50012,
                    N'pass @teacher_head (a deployed version scores the rows) or @soft_labels, not both',
                    1;
            -- The teacher is the head's deployed version, as heads.predict scores by default.
            SELECT TOP (1) @teacher_model_id = d.model_id
            FROM heads.deployments AS d
            WHERE d.head = @teacher_head
            ORDER BY d.deployment_id DESC;
            IF @teacher_model_id IS NULL AND EXISTS (
                SELECT 1 FROM heads.models AS m WHERE m.head = @teacher_head
            )
            BEGIN
                SET @message = CONCAT(
                    N'teacher head ''', @teacher_head, N''' has versions but none is deployed: a ',
                    N'teacher teaches with its deployed version; deploy one with EXEC heads.deploy ',
                    N'@head = N''', @teacher_head, N''', @version = N'
                );
                THROW 50027, @message, 1;
            END;
            IF @teacher_model_id IS NULL
            BEGIN
                SET @message = CONCAT(
                    N'teacher head ''', @teacher_head, N''' does not exist: train it first ',
                    N'(EXEC heads.train @head = N''', @teacher_head, N''', ...), or name another ',
                    N'@teacher_head'
                );
                THROW 50001, @message, 1;
            END;
            SELECT
                @teacher_version = m.version,
                @teacher_kind = m.kind,
                @teacher_blob = m.blob,
                @teacher_sha256 = m.sha256,
                @teacher_classes_json = m.classes_json,
                @teacher_vectors_set_id = m.set_id,
                @teacher_encoder_sha256 = enc.sha256,
                @teacher_encoder_onnx = enc.onnx,
                @teacher_tokenizer_json = enc.tokenizer_json,
                @teacher_dim = enc.dim,
                @teacher_max_length = enc.max_length,
                @teacher_long_text = ts.long_text
            FROM heads.models AS m
            INNER JOIN heads.encoders AS enc ON m.encoder_id = enc.encoder_id
            INNER JOIN heads.embedding_sets AS ts ON m.set_id = ts.set_id
            WHERE m.model_id = @teacher_model_id;
        END;
        SET @teacher_name = COALESCE(
            @teacher,
            CASE
                WHEN @teacher_head IS NOT NULL
                    THEN CONCAT(@teacher_head, N'.v', @teacher_version)
                ELSE CONCAT(@head, @suffix)
            END
        );
        EXEC heads.assert_name @kind = N'teacher', @name = @teacher_name;
        IF @soft_labels IS NULL AND @teacher IS NULL AND @teacher_head IS NULL
        BEGIN
            SET @message = CONCAT(
                N'distill needs a teacher''s soft labels: pass @soft_labels = ',
                N'N''SELECT item_key, ... AS <class>, ...'' or @teacher = N''NAME'' ',
                N'(soft labels stored earlier)'
            );
            THROW 50012, @message, 1;
        END;
        EXEC heads.setting_int @name = N'lock_timeout_ms', @value = @lock_timeout_ms OUTPUT;
        SET @locked = 1;
        EXEC heads.take_lock
            @kind = N'set', @name = @set, @mode = N'Shared', @owner = N'Session',
            @timeout_ms = @lock_timeout_ms;
        SELECT
            @set_id = s.set_id,
            @encoder_id = s.encoder_id
        FROM heads.embedding_sets AS s
        WHERE s.name = @set;
        IF @set_id IS NULL
        BEGIN
            SET @message = CONCAT(
                N'embedding set ''', @set, N''' does not exist: create it with EXEC heads.embed ',
                N'@set = N''', @set, N''', @source = N''SELECT ... AS item_key, ... AS text FROM ...'''
            );
            THROW 50001, @message, 1;
        END;
        SELECT
            @encoder_name = enc.name,
            @dim = enc.dim,
            @tokenizer_json = enc.tokenizer_json,
            @encoder_onnx = enc.onnx
        FROM heads.encoders AS enc
        WHERE enc.encoder_id = @encoder_id;
        SELECT
            @teacher_id = t.teacher_id,
            @teacher_set_id = t.set_id,
            @teacher_classes_json = COALESCE(@teacher_classes_json, t.classes_json)
        FROM heads.teachers AS t
        WHERE t.name = @teacher_name;
        IF @teacher_set_id <> @set_id
        BEGIN
            SET @message = CONCAT(
                N'teacher ''', @teacher_name, N''' holds soft labels of another set, not of ''',
                @set, N''': distil on that set, or store this set''s soft labels under another ',
                N'@teacher name'
            );
            THROW 50021, @message, 1;
        END;
        IF @soft_labels IS NULL AND @teacher_head IS NULL AND @teacher_id IS NULL
        BEGIN
            SET @message = CONCAT(
                N'teacher ''', @teacher_name, N''' has no stored soft labels: store them with ',
                N'EXEC heads.distill ..., @soft_labels = N''SELECT ...'', @teacher = N''',
                @teacher_name, N''''
            );
            THROW 50001, @message, 1;
        END;

        -- The teacher's soft labels: the caller's query (one JSON object a row, so that the
        -- class columns need not be known here; Python turns them into logits), or stored ones.
        CREATE TABLE #soft (
            item_key nvarchar(450) COLLATE DATABASE_DEFAULT NOT NULL,
            logits varbinary(max) NOT NULL
        );
        IF @soft_labels IS NOT NULL
        BEGIN
            CREATE TABLE #soft_rows (
                item_key nvarchar(450) COLLATE DATABASE_DEFAULT NULL,
                row_json nvarchar(max) COLLATE DATABASE_DEFAULT NULL
            );
            SET @soft_query = CONCAT(
                N'SELECT caller_soft.item_key, (SELECT caller_soft.* ',
                N'FOR JSON PATH, WITHOUT_ARRAY_WRAPPER) AS row_json FROM (',
                TRIM(NCHAR(9) + NCHAR(10) + NCHAR(13) + N' ;' FROM @soft_labels), NCHAR(10),
                N') AS caller_soft'
            );
            EXEC heads.stage_query
                @what = N'soft labels', @query = @soft_query, @columns = N'item_key,row_json',
                @into = N'#soft_rows';
            CREATE TABLE #soft_packed (
                item_key nvarchar(450) COLLATE DATABASE_DEFAULT NOT NULL,
                logits varbinary(max) NOT NULL,
                classes_json nvarchar(max) NOT NULL
            );
            INSERT INTO #soft_packed (item_key, logits, classes_json)
            EXEC heads.soft_labels_run
                @error_number = @error_number OUTPUT, @error_message = @error_message OUTPUT;
            IF COALESCE(@error_number, 0) <> 0 THROW @error_number, @error_message, 1;
            SELECT TOP (1) @teacher_classes_json = p.classes_json FROM #soft_packed AS p;
            INSERT INTO #soft (item_key, logits)
            SELECT
                p.item_key,
                p.logits
            FROM #soft_packed AS p;
        END;
        ELSE IF @teacher_head IS NULL
            INSERT INTO #soft (item_key, logits)
            SELECT
                sl.item_key,
                sl.logits
            FROM heads.soft_labels AS sl
            WHERE sl.teacher_id = @teacher_id;

        -- The caller's labels, texts and transfer rows, each read with the caller's permissions.
        CREATE TABLE #labels (
            item_key nvarchar(450) COLLATE DATABASE_DEFAULT NULL,
            label nvarchar(400) COLLATE DATABASE_DEFAULT NULL
        );
        EXEC heads.stage_query
            @what = N'labels', @query = @labels, @columns = N'item_key,label', @into = N'#labels';
        IF EXISTS (SELECT 1 FROM #labels AS l WHERE l.item_key IS NULL)
            THROW 50003,
                N'the labels query returned rows with a NULL item_key: filter them out (WHERE key IS NOT NULL)',
                1;
        CREATE TABLE #texts (
            item_key nvarchar(450) COLLATE DATABASE_DEFAULT NULL,
            text nvarchar(max) COLLATE DATABASE_DEFAULT NULL
        );
        EXEC heads.set_source @set_id = @set_id, @source = @source, @query = @text_query OUTPUT;
        IF @text_query IS NOT NULL
            EXEC heads.stage_query
                @what = N'source', @query = @text_query, @columns = N'item_key,text',
                @into = N'#texts';
        CREATE TABLE #transfer (item_key nvarchar(450) COLLATE DATABASE_DEFAULT NULL);
        IF @transfer IS NOT NULL
            EXEC heads.stage_query
                @what = N'transfer', @query = @transfer, @columns = N'item_key',
                @into = N'#transfer';

        -- A teacher head scores the student's rows and its transfer rows (revision 0007); a head
        -- student has no text input to read transfer rows with, so it gets none.
        CREATE TABLE #taught (
            item_key nvarchar(450) COLLATE DATABASE_DEFAULT NOT NULL,
            text nvarchar(max) COLLATE DATABASE_DEFAULT NULL,
            logits varbinary(max) NOT NULL,
            origin_key nvarchar(450) COLLATE DATABASE_DEFAULT NULL,
            transfer int NOT NULL
        );
        IF @teacher_head IS NOT NULL
        BEGIN
            CREATE TABLE #teach_input (
                item_key nvarchar(450) COLLATE DATABASE_DEFAULT NOT NULL,
                text nvarchar(max) COLLATE DATABASE_DEFAULT NULL,
                label nvarchar(400) COLLATE DATABASE_DEFAULT NULL,
                teacher_vector varbinary(max) NULL,
                teacher_text_sha256 char(64) NULL
            );
            INSERT INTO #teach_input (item_key, text, label, teacher_vector, teacher_text_sha256)
            SELECT
                tx.item_key,
                tx.text,
                l.label,
                e.vector,
                e.text_sha256
            FROM (
                SELECT
                    counted.item_key,
                    counted.text
                FROM (
                    SELECT
                        ct.item_key,
                        ct.text,
                        COUNT(*) OVER (PARTITION BY ct.item_key) AS copies
                    FROM #texts AS ct
                    WHERE ct.item_key IS NOT NULL
                ) AS counted
                WHERE counted.copies = 1
            ) AS tx
            LEFT OUTER JOIN #labels AS l ON tx.item_key = l.item_key
            LEFT OUTER JOIN heads.embeddings AS e
                ON e.set_id = @teacher_vectors_set_id AND tx.item_key = e.item_key;
            SET @rows_wanted = CASE WHEN @student = N'head' THEN 0 ELSE @transfer_rows END;
            INSERT INTO #taught (item_key, text, logits, origin_key, transfer)
            EXEC heads.teach_run
                @teacher_blob = @teacher_blob,
                @teacher_sha256 = @teacher_sha256,
                @teacher_kind = @teacher_kind,
                @encoder_sha256 = @teacher_encoder_sha256,
                @encoder_onnx = @teacher_encoder_onnx,
                @tokenizer_json = @teacher_tokenizer_json,
                @dim = @teacher_dim,
                @max_length = @teacher_max_length,
                @long_text = @teacher_long_text,
                @student_tokenizer_json = @tokenizer_json,
                @student_encoder_onnx = @encoder_onnx,
                @transfer_rows = @rows_wanted,
                @test_fraction = @test_fraction,
                @seed = @seed,
                @error_number = @error_number OUTPUT,
                @error_message = @error_message OUTPUT;
            IF COALESCE(@error_number, 0) <> 0 THROW @error_number, @error_message, 1;
            INSERT INTO #soft (item_key, logits)
            SELECT
                tt.item_key,
                tt.logits
            FROM #taught AS tt
            WHERE tt.transfer = 0;
        END;

        -- Soft labels given now must be of rows the set holds: in its text or among its vectors.
        IF @soft_labels IS NOT NULL
        BEGIN
            SELECT
                @outside = COUNT_BIG(*),
                @example = MIN(soft.item_key)
            FROM #soft AS soft
            WHERE
                NOT EXISTS (SELECT 1 FROM #texts AS tx WHERE tx.item_key = soft.item_key)
                AND NOT EXISTS (
                    SELECT 1
                    FROM heads.embeddings AS e
                    WHERE e.set_id = @set_id AND e.item_key = soft.item_key
                );
            IF @outside > 0
            BEGIN
                SET @message = CONCAT(
                    @outside, N' soft-labelled key(s) are not in set ''', @set, N''' (e.g. ''',
                    @example, N'''): they belong to another set; filter the soft labels query, ',
                    N'or pass @source returning their text'
                );
                THROW 50021, @message, 1;
            END;
        END;

        -- One row per labelled or soft-labelled key, with both inputs: Python takes the one its
        -- student reads. A key the source returns twice has no text (as in heads.embed).
        CREATE TABLE #distill_input (
            item_key nvarchar(450) COLLATE DATABASE_DEFAULT NOT NULL,
            label nvarchar(400) COLLATE DATABASE_DEFAULT NULL,
            logits varbinary(max) NULL,
            text nvarchar(max) COLLATE DATABASE_DEFAULT NULL,
            vector varbinary(max) NULL,
            in_transfer int NULL
        );
        INSERT INTO #distill_input (item_key, label, logits, text, vector, in_transfer)
        SELECT
            k.item_key,
            l.label,
            soft.logits,
            txt.text,
            e.vector,
            CASE
                WHEN @transfer IS NULL THEN NULL
                WHEN EXISTS (SELECT 1 FROM #transfer AS tr WHERE tr.item_key = k.item_key) THEN 1
                ELSE 0
            END
        FROM (
            SELECT lk.item_key FROM #labels AS lk
            UNION
            SELECT sk.item_key FROM #soft AS sk
        ) AS k
        LEFT OUTER JOIN #labels AS l ON k.item_key = l.item_key
        LEFT OUTER JOIN #soft AS soft ON k.item_key = soft.item_key
        LEFT OUTER JOIN (
            SELECT
                counted.item_key,
                counted.text
            FROM (
                SELECT
                    ct.item_key,
                    ct.text,
                    COUNT(*) OVER (PARTITION BY ct.item_key) AS copies
                FROM #texts AS ct
            ) AS counted
            WHERE counted.copies = 1
        ) AS txt ON k.item_key = txt.item_key
        LEFT OUTER JOIN heads.embeddings AS e
            ON e.set_id = @set_id AND k.item_key = e.item_key;
        -- The teacher head's transfer rows: no gold label, the teacher's logits, their text.
        INSERT INTO #distill_input (item_key, label, logits, text, vector, in_transfer)
        SELECT
            tt.item_key,
            NULL,
            tt.logits,
            tt.text,
            NULL,
            CASE WHEN @transfer IS NULL THEN NULL ELSE 1 END
        FROM #taught AS tt
        WHERE tt.transfer = 1;

        SELECT TOP (1) @deployed_model_id = d.model_id
        FROM heads.deployments AS d
        WHERE d.head = @head
        ORDER BY d.deployment_id DESC;
        SELECT @deployed_macro_f1 = m.macro_f1 FROM heads.models AS m WHERE m.model_id = @deployed_model_id;
        CREATE TABLE #version (
            classes_json nvarchar(max) NOT NULL,
            params_json nvarchar(max) NOT NULL,
            metrics_json nvarchar(max) NOT NULL,
            loss_curve_json nvarchar(max) NOT NULL,
            accuracy float NOT NULL,
            macro_f1 float NOT NULL,
            rows_train int NOT NULL,
            rows_test int NOT NULL,
            seconds float NOT NULL,
            blob varbinary(max) NOT NULL,
            sha256 char(64) NOT NULL,
            onnx varbinary(max) NULL,
            deploy bit NOT NULL,
            deploy_reason nvarchar(200) NOT NULL,
            kind nvarchar(32) NOT NULL,
            parameters int NULL,
            teacher_accuracy float NULL,
            rows_without_input int NULL
        );
        INSERT INTO #version (
            classes_json, params_json, metrics_json, loss_curve_json, accuracy, macro_f1,
            rows_train, rows_test, seconds, blob, sha256, onnx, deploy, deploy_reason, kind,
            parameters, teacher_accuracy, rows_without_input
        )
        EXEC heads.distill_run
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
            @error_message = @error_message OUTPUT;
        IF COALESCE(@error_number, 0) <> 0 THROW @error_number, @error_message, 1;

        -- The teacher's soft labels (given now) in a transaction of their own, then the version
        -- in heads.write_version's short one (revision 0006: the rewrite of every soft label no
        -- longer holds the head's lock), as the embedded host stores them.
        IF @soft_labels IS NOT NULL OR @teacher_head IS NOT NULL
        BEGIN
            BEGIN TRANSACTION;
            -- A teacher head dropped while the student learnt (revision 0007): nothing stored.
            IF @teacher_head IS NOT NULL AND NOT EXISTS (
                SELECT 1
                FROM heads.models AS m WITH (UPDLOCK, HOLDLOCK)
                WHERE m.model_id = @teacher_model_id
            )
            BEGIN
                SET @message = CONCAT(
                    N'teacher head ''', @teacher_head, N''' was dropped while this student was ',
                    N'distilled (the version that taught it is gone): no student version was ',
                    N'stored; train and deploy a teacher head again and re-run heads.distill'
                );
                THROW 50028, @message, 1;
            END;
            IF @teacher_id IS NULL
            BEGIN
                INSERT INTO heads.teachers (name, set_id, classes_json, model_id)
                VALUES (@teacher_name, @set_id, @teacher_classes_json, @teacher_model_id);
                SET @teacher_id = SCOPE_IDENTITY();
            END;
            ELSE
            BEGIN
                UPDATE t
                SET
                    t.classes_json = @teacher_classes_json,
                    t.model_id = @teacher_model_id
                FROM heads.teachers AS t
                WHERE t.teacher_id = @teacher_id;
                DELETE sl FROM heads.soft_labels AS sl WHERE sl.teacher_id = @teacher_id;
            END;
            INSERT INTO heads.soft_labels (teacher_id, item_key, logits)
            SELECT
                @teacher_id,
                soft.item_key,
                soft.logits
            FROM #soft AS soft;
            COMMIT TRANSACTION;
        END;
        EXEC heads.write_version
            @head = @head,
            @set_id = @set_id,
            @encoder_id = @encoder_id,
            @teacher_id = @teacher_id,
            @deploy = @deploy,
            @deployed_model_id = @deployed_model_id,
            @lock_timeout_ms = @lock_timeout_ms,
            @model_id = @model_id OUTPUT,
            @deployed = @deployed OUTPUT,
            @deployed_macro_f1 = @deployed_macro_f1 OUTPUT;
        EXEC heads.release_lock @kind = N'set', @name = @set;
        SET @locked = 0;

        SELECT
            m.head,
            m.version,
            m.model_id,
            m.kind,
            @set AS [set],
            @encoder_name AS encoder,
            @teacher_name AS teacher,
            m.classes_json,
            m.accuracy,
            m.macro_f1,
            m.teacher_accuracy,
            m.parameters,
            m.rows_train,
            m.rows_test,
            v.rows_without_input,
            @deployed AS deployed,
            @deployed_macro_f1 AS previous_deployed_macro_f1,
            m.params_json,
            m.seconds
        FROM heads.models AS m
        CROSS JOIN #version AS v
        WHERE m.model_id = @model_id;
    END TRY
    BEGIN CATCH
        IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;
        IF @locked = 1 EXEC heads.release_lock @kind = N'set', @name = @set;
        THROW;
    END CATCH;
END;
GO

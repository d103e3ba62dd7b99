-- heads.store_soft_labels: create teacher @teacher on set @set_id, or replace all of its soft
-- labels, from the caller's #soft_labels (item_key, logits: float32 bytes in @classes_json's
-- order), in one transaction; the teacher records the version they come from (@model_id, a
-- version of the head named @teacher, or NULL). The sidecar's teacher job writes its soft labels
-- through this procedure, not through table grants (revision 0007): heads_sidecar holds no
-- INSERT, UPDATE or DELETE on heads.teachers or heads.soft_labels. Scope as heads.add_version: a
-- sidecar passes the teacher job it holds (heads.assert_job_held), and may write only that
-- job's teacher (its head plus heads.settings' teacher.suffix) on that job's set; heads_admin
-- passes @job_id NULL. A teacher of the same name on another set is 50021.
-- Errors: 50021, 50072.
CREATE OR ALTER PROCEDURE heads.store_soft_labels
    @job_id int,
    @worker nvarchar(200),
    @teacher nvarchar(128),
    @set_id int,
    @classes_json nvarchar(max),
    @model_id int,
    @teacher_id int OUTPUT
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
    DECLARE @teacher_set_id int;
    EXEC heads.assert_job_held
        @job_id = @job_id,
        @worker = @worker,
        @kind = 'teacher',
        @head = @job_head OUTPUT,
        @set_name = @job_set OUTPUT,
        @parameters_json = @job_parameters OUTPUT,
        @requested_user = @requested_user OUTPUT;
    IF @job_id IS NOT NULL
    BEGIN
        EXEC heads.setting @name = N'teacher.suffix', @value = @suffix OUTPUT;
        IF
            @teacher IS NULL
            OR @teacher <> CONCAT(@job_head, @suffix)
            OR NOT EXISTS (
                SELECT 1 FROM heads.embedding_sets AS es WHERE es.set_id = @set_id AND es.name = @job_set
            )
            OR (
                @model_id IS NOT NULL
                AND NOT EXISTS (
                    SELECT 1
                    FROM heads.models AS m
                    WHERE m.model_id = @model_id AND m.head = @teacher AND m.set_id = @set_id
                )
            )
        BEGIN
            SET @message = CONCAT(
                N'job ', @job_id, N' stores the soft labels of teacher ''', @job_head, @suffix,
                N''' on set ''', @job_set, N''' only, not of teacher ''', @teacher,
                N''': a sidecar writes only what the job it holds asked for'
            );
            THROW 50072, @message, 1;
        END;
    END;

    BEGIN TRANSACTION;
    SELECT
        @teacher_id = t.teacher_id,
        @teacher_set_id = t.set_id
    FROM heads.teachers AS t WITH (UPDLOCK, HOLDLOCK)
    WHERE t.name = @teacher;
    IF @teacher_set_id <> @set_id
    BEGIN
        SET @message = CONCAT(
            N'teacher ''', @teacher, N''' holds soft labels of another set: store this set''s ',
            N'soft labels under another teacher name'
        );
        THROW 50021, @message, 1;
    END;
    IF @teacher_id IS NULL
    BEGIN
        INSERT INTO heads.teachers (name, set_id, classes_json, model_id)
        VALUES (@teacher, @set_id, @classes_json, @model_id);
        SET @teacher_id = SCOPE_IDENTITY();
    END;
    ELSE
    BEGIN
        UPDATE t
        SET
            t.classes_json = @classes_json,
            t.model_id = @model_id
        FROM heads.teachers AS t
        WHERE t.teacher_id = @teacher_id;
        DELETE sl FROM heads.soft_labels AS sl WHERE sl.teacher_id = @teacher_id;
    END;
    INSERT INTO heads.soft_labels (teacher_id, item_key, logits)
    SELECT
        @teacher_id,
        s.item_key,
        s.logits
    FROM #soft_labels AS s;
    COMMIT TRANSACTION;
END;
GO

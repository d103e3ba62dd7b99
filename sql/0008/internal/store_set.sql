-- heads.store_set: a set as the Python command line writes it on SQL Server (revision 0008;
-- sqlheads.store.repository.Store.add_set and .set_source_query, outside any sidecar job): the
-- set @set, created if missing with @encoder_id and @long_text (NULL: heads.settings' default)
-- and owned by the caller; an existing set must be the caller's, or the caller a member of
-- heads_admin (heads.assert_set_owner, 50074). With @source not NULL, it records @source as the
-- set's source query and the caller (USER_SID(), USER_NAME()) as its author. heads_admin holds
-- no INSERT on heads.embedding_sets, nor UPDATE of its source query or author: the author of a
-- stored query is always the user who stored it, so no role can make a query run as another
-- user (the fourth audit, finding 4). @set_id: the set.
-- Errors: 50001, 50002, 50012, 50074.
CREATE OR ALTER PROCEDURE heads.store_set
    @set nvarchar(128),
    @encoder_id int = NULL,
    @long_text varchar(16) = NULL,
    @source nvarchar(max) = NULL,
    @set_id int OUTPUT
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    DECLARE @message nvarchar(2048);
    DECLARE @mode nvarchar(400) = @long_text;
    DECLARE @is_admin bit = IIF(
        COALESCE(IS_MEMBER(N'heads_admin'), 0) = 1 OR COALESCE(IS_MEMBER(N'db_owner'), 0) = 1, 1, 0
    );
    EXEC heads.assert_name @kind = N'set', @name = @set;
    EXEC heads.setting @name = N'long_text', @value = @mode OUTPUT;
    BEGIN TRANSACTION;
    SET @set_id = NULL;
    SELECT @set_id = es.set_id
    FROM heads.embedding_sets AS es WITH (UPDLOCK, HOLDLOCK)
    WHERE es.name = @set;
    IF @set_id IS NULL
    BEGIN
        IF NOT EXISTS (SELECT 1 FROM heads.encoders AS enc WHERE enc.encoder_id = @encoder_id)
        BEGIN
            SET @message = CONCAT(
                N'set ''', @set, N''' does not exist and encoder id ',
                COALESCE(CONVERT(nvarchar(12), @encoder_id), N'NULL'),
                N' is not registered: register the encoder, then embed again'
            );
            THROW 50001, @message, 1;
        END;
        INSERT INTO heads.embedding_sets (name, encoder_id, long_text, owner_sid, owner_user)
        VALUES (@set, @encoder_id, @mode, USER_SID(), USER_NAME());
        SET @set_id = SCOPE_IDENTITY();
    END;
    ELSE
    BEGIN
        DECLARE @me varbinary(85) = USER_SID();
        DECLARE @my_name nvarchar(128) = USER_NAME();
        EXEC heads.assert_set_owner
            @set_id = @set_id, @owner_sid = @me, @owner_user = @my_name, @is_admin = @is_admin;
    END;
    IF @source IS NOT NULL
        UPDATE es
        SET
            es.source_query = @source,
            es.source_user = USER_NAME(),
            es.source_sid = USER_SID()
        FROM heads.embedding_sets AS es
        WHERE es.set_id = @set_id;
    COMMIT TRANSACTION;
END;
GO

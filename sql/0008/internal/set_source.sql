-- heads.set_source: the query a verb reads a set's text through: @source when the caller passes
-- one, else the set's stored source query, but only for the database user who stored it. A
-- stored query is dynamic SQL: heads.stage_query runs it with the caller's own permissions,
-- never its author's, so running one user's text for another would be a privilege escalation
-- (a query planted by one login, run by an admin). Anyone else, and everyone for a query whose
-- author is not known, passes their own @source: 50071, which names neither the query nor its
-- author. Revision 0008: the author is compared by security identifier (source_sid against
-- USER_SID()), not by name: a user dropped and made again under the same name is another
-- principal and inherits no stored query (the fourth audit, finding 9); and only procedures
-- write source_sid (no role holds INSERT or UPDATE on it: finding 4).
-- @query is NULL when the set has no stored query (the caller decides whether it needs one).
-- Errors: 50071.
CREATE OR ALTER PROCEDURE heads.set_source
    @set_id int,
    @source nvarchar(max),
    @query nvarchar(max) OUTPUT
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @message nvarchar(2048);
    DECLARE @set nvarchar(128);
    DECLARE @stored nvarchar(max);
    DECLARE @stored_by varbinary(85);
    SET @query = @source;
    IF @source IS NOT NULL RETURN;
    SELECT
        @set = es.name,
        @stored = es.source_query,
        @stored_by = es.source_sid
    FROM heads.embedding_sets AS es
    WHERE es.set_id = @set_id;
    IF @stored IS NULL RETURN;
    IF @stored_by IS NULL OR @stored_by <> USER_SID()
    BEGIN
        SET @message = CONCAT(
            N'set ''', @set, N''' has a source query stored by another database user (or ',
            N'before authors were recorded), and a stored query runs only for its author: pass ',
            N'your own @source = N''SELECT ... AS item_key, ... AS text FROM ...'', or embed the ',
            N'set yourself to store yours'
        );
        THROW 50071, @message, 1;
    END;
    SET @query = @stored;
END;
GO

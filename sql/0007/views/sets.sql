-- heads.sets: the embedding sets as analysts and BI tools read them, without the stored source
-- query's text (revision 0007): heads_analyst no longer reads heads.embedding_sets, whose
-- source_query holds other users' query texts. source_user is the database user whose query the
-- set stored: it runs for that user alone (heads.set_source); anyone else passes @source.
CREATE OR ALTER VIEW heads.sets
AS
SELECT
    es.set_id,
    es.name,
    enc.name AS encoder,
    es.long_text,
    es.created_at,
    es.source_user
FROM heads.embedding_sets AS es
INNER JOIN heads.encoders AS enc ON es.encoder_id = enc.encoder_id;
GO

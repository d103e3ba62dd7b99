-- heads.label_queue: the rows a person should label next, for each head's deployed version: the
-- rows it scored that were not among its training or held-out rows (heads.labelled_keys, in
-- the set it was trained on), with the margin between the two top class probabilities (the
-- smaller, the less sure the head is: ORDER BY margin). Versions trained before revision 0007
-- recorded no labelled keys and are left out. `sqlheads label-queue` adds what SQL cannot do:
-- it reads the stored vectors so that the queue holds no run of near-duplicates.
-- Mirrors label_queue_select() in python/sqlheads/store/queue_drift.py (a test compares them).
CREATE OR ALTER VIEW heads.label_queue
AS
SELECT
    m.head,
    m.version,
    p.model_id,
    s.name AS set_name,
    p.item_key,
    p.label AS predicted_label,
    p.score AS probability,
    p.score - runner_up.probability AS margin,
    p.predicted_at
FROM heads.models AS m
INNER JOIN heads.predictions AS p ON m.model_id = p.model_id
INNER JOIN heads.embedding_sets AS s ON p.set_id = s.set_id
OUTER APPLY (
    SELECT TRY_CAST(j.[value] AS float) AS probability
    FROM OPENJSON(p.probabilities_json) AS j
    ORDER BY TRY_CAST(j.[value] AS float) DESC
    OFFSET 1 ROWS FETCH NEXT 1 ROWS ONLY
) AS runner_up
WHERE
    m.model_id = (
        SELECT TOP (1) d.model_id
        FROM heads.deployments AS d
        WHERE d.head = m.head
        ORDER BY d.deployment_id DESC
    )
    AND EXISTS (
        SELECT 1
        FROM heads.labelled_keys AS recorded
        WHERE recorded.model_id = m.model_id
    )
    AND NOT EXISTS (
        SELECT 1
        FROM heads.labelled_keys AS k
        WHERE k.model_id = m.model_id AND k.item_key = p.item_key AND p.set_id = m.set_id
    );
GO

-- heads.latest_predictions: each row's prediction by the most recently deployed version of its
-- head that has one: the deployed version's, or, where a deploy could not re-score a set (a
-- text model: heads.predict runs its source with the caller's permissions), the version it
-- replaced, until heads.predict runs. What a BI tool reads (GRANT SELECT to heads_reader): no
-- blobs, one row per head, set and key; a deploy never empties it (issue 20).
-- Mirrors latest_predictions_select() in python/sqlheads/store/schema.py (a test compares them).
CREATE OR ALTER VIEW heads.latest_predictions
AS
SELECT
    m.head,
    m.version,
    p.model_id,
    s.name AS set_name,
    p.item_key,
    p.label,
    p.score,
    p.probabilities_json,
    p.predicted_at
FROM heads.predictions AS p
INNER JOIN (
    SELECT
        d.model_id,
        MAX(d.deployment_id) AS deployment_id
    FROM heads.deployments AS d
    GROUP BY d.model_id
) AS shown ON p.model_id = shown.model_id
INNER JOIN heads.models AS m ON p.model_id = m.model_id
INNER JOIN heads.embedding_sets AS s ON p.set_id = s.set_id
WHERE NOT EXISTS (
    SELECT 1
    FROM heads.predictions AS np
    INNER JOIN (
        SELECT
            nd.model_id,
            MAX(nd.deployment_id) AS deployment_id
        FROM heads.deployments AS nd
        GROUP BY nd.model_id
    ) AS newer ON np.model_id = newer.model_id
    INNER JOIN heads.models AS nm ON np.model_id = nm.model_id
    WHERE
        np.set_id = p.set_id
        AND np.item_key = p.item_key
        AND nm.head = m.head
        AND newer.deployment_id > shown.deployment_id
);
GO

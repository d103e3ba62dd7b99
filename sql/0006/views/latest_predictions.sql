-- heads.latest_predictions: each row's prediction by the most recently deployed version of its
-- head that has one: the deployed version's, or, where a deploy could not re-score a set (a
-- text model: heads.predict runs its source with the caller's permissions), the version it
-- replaced, until heads.predict runs. What a BI tool reads (GRANT SELECT to heads_reader): no
-- blobs, one row per head, set and key; a deploy never empties it (issue 20). The deployed
-- version's rows need no look further; an earlier version's row is shown only where no later
-- deployed version has its key (a primary key seek per later version).
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
        d.head,
        MAX(d.deployment_id) AS deployment_id
    FROM heads.deployments AS d
    GROUP BY d.model_id, d.head
) AS shown ON p.model_id = shown.model_id
INNER JOIN (
    SELECT
        nd.head,
        MAX(nd.deployment_id) AS deployment_id
    FROM heads.deployments AS nd
    GROUP BY nd.head
) AS newest ON shown.head = newest.head
INNER JOIN heads.models AS m ON p.model_id = m.model_id
INNER JOIN heads.embedding_sets AS s ON p.set_id = s.set_id
WHERE
    shown.deployment_id = newest.deployment_id
    OR NOT EXISTS (
        SELECT 1
        FROM heads.predictions AS np
        WHERE
            np.model_id IN (
                SELECT later.model_id
                FROM heads.deployments AS later
                WHERE later.head = shown.head AND later.deployment_id > shown.deployment_id
            )
            AND np.set_id = p.set_id
            AND np.item_key = p.item_key
    );
GO

-- heads.latest_predictions: the predictions of the deployed version of every head.
-- What a BI tool reads (GRANT SELECT to heads_reader): no blobs, one row per head, set and key.
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
        d.head,
        d.model_id,
        d.deployed_at
    FROM heads.deployments AS d
    INNER JOIN (
        SELECT
            nd.head,
            MAX(nd.deployment_id) AS deployment_id
        FROM heads.deployments AS nd
        GROUP BY nd.head
    ) AS newest ON d.deployment_id = newest.deployment_id
) AS current_deployments ON p.model_id = current_deployments.model_id
INNER JOIN heads.models AS m ON p.model_id = m.model_id
INNER JOIN heads.embedding_sets AS s ON p.set_id = s.set_id;
GO

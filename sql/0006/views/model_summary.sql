-- heads.model_summary: every version of every head, its held-out metrics, and whether it is
-- the deployed one; for students, their parameters, teacher and the teacher's accuracy on the
-- same held-out rows; the TF-IDF + LR baseline fitted on the same rows and whether the version
-- is below it (issue 21). No blobs. Mirrors model_summary_select() in store/schema.py.
CREATE OR ALTER VIEW heads.model_summary
AS
SELECT
    m.head,
    m.version,
    m.model_id,
    m.kind,
    s.name AS set_name,
    e.name AS encoder_name,
    m.accuracy,
    m.macro_f1,
    m.rows_train,
    m.rows_test,
    m.seconds,
    m.created_at,
    CASE WHEN current_deployments.model_id IS NOT NULL THEN 1 ELSE 0 END AS is_deployed,
    m.parameters,
    t.name AS teacher,
    m.teacher_accuracy,
    m.baseline_accuracy,
    m.baseline_macro_f1,
    m.baseline_seconds,
    m.baseline_skipped,
    CASE WHEN m.accuracy < m.baseline_accuracy THEN 1 ELSE 0 END AS below_baseline
FROM heads.models AS m
INNER JOIN heads.embedding_sets AS s ON m.set_id = s.set_id
INNER JOIN heads.encoders AS e ON m.encoder_id = e.encoder_id
LEFT OUTER JOIN heads.teachers AS t ON m.teacher_id = t.teacher_id
LEFT OUTER JOIN (
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
) AS current_deployments ON m.model_id = current_deployments.model_id;
GO

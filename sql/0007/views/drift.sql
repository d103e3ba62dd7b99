-- heads.drift: for each head's deployed version, one row per set it scored, over the rows it
-- was not labelled on (heads.labelled_keys): how many and when; their mean top probability
-- against the held-out rows'; the population stability index of the top probability (bins of
-- 0.05, both histograms smoothed by the version's recorded "smoothing" rows a bin) against the
-- held-out histogram; the largest gap between a class's share of the predictions and of the
-- training labels; and whether any passes the limits the version recorded (judged = 0: fewer
-- rows than its recorded minimum, or a version with no reference). The PSI limit is over the
-- PSI two samples of these sizes show by chance: 19 (bins - 1) x (1/rows + 1/held-out rows),
-- as engine/drift.py's psi_noise. Every reference number is
-- the one Python recorded at training time in metrics_json's "drift" (engine/drift.py).
-- `sqlheads drift` adds the embedding shift, which needs the stored vectors.
-- Mirrors drift_select() in python/sqlheads/store/queue_drift.py (a test compares them).
CREATE OR ALTER VIEW heads.drift
AS
SELECT
    m.head,
    m.version,
    scored.model_id,
    s.name AS set_name,
    scored.rows_scored,
    scored.first_predicted_at,
    scored.last_predicted_at,
    scored.mean_top_probability,
    reference.held_out_mean_top_probability,
    psi.top_probability_psi,
    share_gap.largest_share_gap,
    CASE WHEN scored.rows_scored >= reference.min_rows THEN 1 ELSE 0 END AS judged,
    CASE
        WHEN
            scored.rows_scored >= reference.min_rows
            AND (
                psi.top_probability_psi
                > reference.psi_limit
                + 19 * (1.0 / scored.rows_scored + 1.0 / NULLIF(reference.held_out_rows, 0))
                OR ABS(scored.mean_top_probability - reference.held_out_mean_top_probability)
                > reference.confidence_limit
                OR share_gap.largest_share_gap > reference.share_limit
            )
            THEN 1
        ELSE 0
    END AS drifted
FROM heads.models AS m
INNER JOIN (
    SELECT
        p.model_id,
        p.set_id,
        COUNT(*) AS rows_scored,
        MIN(p.predicted_at) AS first_predicted_at,
        MAX(p.predicted_at) AS last_predicted_at,
        AVG(p.score) AS mean_top_probability
    FROM heads.models AS pm
    INNER JOIN heads.predictions AS p ON pm.model_id = p.model_id
    WHERE
        pm.model_id = (
            SELECT TOP (1) d.model_id
            FROM heads.deployments AS d
            WHERE d.head = pm.head
            ORDER BY d.deployment_id DESC
        )
        AND EXISTS (SELECT 1 FROM heads.labelled_keys AS recorded WHERE recorded.model_id = pm.model_id)
        AND NOT EXISTS (
            SELECT 1
            FROM heads.labelled_keys AS k
            WHERE k.model_id = pm.model_id AND k.item_key = p.item_key AND p.set_id = pm.set_id
        )
    GROUP BY p.model_id, p.set_id
) AS scored ON m.model_id = scored.model_id
INNER JOIN heads.embedding_sets AS s ON scored.set_id = s.set_id
CROSS APPLY (
    SELECT
        TRY_CAST(JSON_VALUE(m.metrics_json, '$.drift.held_out_mean_top_probability') AS float)
        AS held_out_mean_top_probability,
        TRY_CAST(JSON_VALUE(m.metrics_json, '$.drift.smoothing') AS float) AS smoothing,
        TRY_CAST(JSON_VALUE(m.metrics_json, '$.drift.held_out_rows') AS int) AS held_out_rows,
        TRY_CAST(JSON_VALUE(m.metrics_json, '$.drift.min_rows') AS int) AS min_rows,
        TRY_CAST(JSON_VALUE(m.metrics_json, '$.drift.limits.psi') AS float) AS psi_limit,
        TRY_CAST(JSON_VALUE(m.metrics_json, '$.drift.limits.confidence') AS float) AS confidence_limit,
        TRY_CAST(JSON_VALUE(m.metrics_json, '$.drift.limits.share') AS float) AS share_limit
) AS reference
OUTER APPLY (
    SELECT
        SUM(
            (observed.share - TRY_CAST(expected.[value] AS float))
            * LOG(observed.share / TRY_CAST(expected.[value] AS float))
        ) AS top_probability_psi
    FROM OPENJSON(m.metrics_json, '$.drift.top_probability_shares') AS expected
    LEFT OUTER JOIN (
        SELECT
            p.model_id,
            p.set_id,
            CASE WHEN p.score * 20 >= 19 THEN 19 ELSE CAST(FLOOR(p.score * 20) AS int) END AS bin,
            COUNT(*) AS n
        FROM heads.models AS pm
        INNER JOIN heads.predictions AS p ON pm.model_id = p.model_id
        WHERE
            pm.model_id = (
                SELECT TOP (1) d.model_id
                FROM heads.deployments AS d
                WHERE d.head = pm.head
                ORDER BY d.deployment_id DESC
            )
            AND NOT EXISTS (
                SELECT 1
                FROM heads.labelled_keys AS k
                WHERE k.model_id = pm.model_id AND k.item_key = p.item_key AND p.set_id = pm.set_id
            )
        GROUP BY
            p.model_id,
            p.set_id,
            CASE WHEN p.score * 20 >= 19 THEN 19 ELSE CAST(FLOOR(p.score * 20) AS int) END
    ) AS bins
        ON
            scored.model_id = bins.model_id
            AND scored.set_id = bins.set_id
            AND TRY_CAST(expected.[key] AS int) = bins.bin
    CROSS APPLY (
        SELECT
            (COALESCE(bins.n, 0) + reference.smoothing)
            / (scored.rows_scored + reference.smoothing * 20) AS share
    ) AS observed
) AS psi
OUTER APPLY (
    SELECT
        MAX(ABS(COALESCE(labels.n, 0) * 1.0 / scored.rows_scored - TRY_CAST(training.[value] AS float)))
        AS largest_share_gap
    FROM OPENJSON(m.metrics_json, '$.drift.training_class_shares') AS training
    LEFT OUTER JOIN (
        SELECT
            p.model_id,
            p.set_id,
            p.label,
            COUNT(*) AS n
        FROM heads.models AS pm
        INNER JOIN heads.predictions AS p ON pm.model_id = p.model_id
        WHERE
            pm.model_id = (
                SELECT TOP (1) d.model_id
                FROM heads.deployments AS d
                WHERE d.head = pm.head
                ORDER BY d.deployment_id DESC
            )
            AND NOT EXISTS (
                SELECT 1
                FROM heads.labelled_keys AS k
                WHERE k.model_id = pm.model_id AND k.item_key = p.item_key AND p.set_id = pm.set_id
            )
        GROUP BY p.model_id, p.set_id, p.label
    ) AS labels
        ON
            scored.model_id = labels.model_id
            AND scored.set_id = labels.set_id
            AND training.[key] COLLATE DATABASE_DEFAULT = labels.label
) AS share_gap;
GO

-- heads.report_figures: the numbers behind `sqlheads report`'s plots, with the head and version
-- they belong to, one row a point, so that a BI tool can draw the same figures. Mirrors
-- report_figures_select() in store/schema.py.
CREATE OR ALTER VIEW heads.report_figures
AS
SELECT
    m.head,
    m.version,
    f.model_id,
    f.figure,
    f.series,
    f.x,
    f.value
FROM heads.model_figures AS f
INNER JOIN heads.models AS m ON f.model_id = m.model_id;
GO

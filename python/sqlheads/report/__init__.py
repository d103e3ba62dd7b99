"""``sqlheads report``: one version of a head as an HTML page with PNG plots."""

from sqlheads.report.figures import (
    FIGURES,
    build_report,
    draw_students,
    load_report_data,
    pyplot,
    student_points,
)

__all__ = [
    "FIGURES",
    "build_report",
    "draw_students",
    "load_report_data",
    "pyplot",
    "student_points",
]

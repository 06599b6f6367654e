"""Reports of runs (`chainlang report`, serve's pages): what a transcript says a run did, as
one self-contained HTML page."""

from chainlang.report.page import report_html, report_of

__all__ = ["report_html", "report_of"]

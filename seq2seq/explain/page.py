"""The report as one self-contained HTML page: ``static/explain.html`` (its CSS, script and SVG
drawing inline, nothing fetched, so it works offline) with the report's JSON placed inside it.

The JSON goes into a ``<script type="application/json">`` element, which the browser never runs,
with every ``<`` written ``\\u003c`` (the same string to JSON), so no text in the report can close
the element or change how the HTML parser reads it. ``served`` tells the page that a server is
behind it, which shows its form.
"""

import json
from importlib import resources

PLACEHOLDER = "__REPORT_JSON__"


def report_json(report: dict | None) -> str:
    """The report as JSON text (UTF-8 characters kept; NaN and infinity refused)."""
    return json.dumps(report, ensure_ascii=False, allow_nan=False)


def render_page(report: dict | None, served: bool = False) -> str:
    """The HTML page showing ``report`` (None: no sentence yet, only the form of a served page)."""
    template = resources.files("seq2seq.explain").joinpath("static/explain.html").read_text(encoding="utf-8")
    data = report_json({"served": served, "report": report})
    return template.replace(PLACEHOLDER, data.replace("<", "\\u003c"))

"""Reports: JSON + self-contained HTML (embedded PNG plots) for suite results."""

from .write import render_html as render_html
from .write import versions as versions
from .write import write_report as write_report

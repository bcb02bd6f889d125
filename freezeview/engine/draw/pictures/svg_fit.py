"""An SVG a browser shows whole: Graphviz's root sized to the window, never past its own size.

Graphviz writes the root ``<svg>`` at the drawing's natural size in points
(``width="9160pt" height="6525pt"``): a ResNet-50 opened in a browser then shows its
top-left corner, one box in a sea of white. :func:`fit_to_window` sizes the root at
100% of the window instead, scaled to fit by its ``viewBox`` (``meet``: the whole
graph, centred at the top), and caps it at the natural size so that a small graph is not
blown up. The drawing itself is untouched, and so is the ``viewBox`` the review page
reads its size from.
"""

from __future__ import annotations

import re

__all__ = ["fit_to_window"]

_ROOT = re.compile(
    rb'<svg width="(?P<w>[\d.]+)(?P<wu>pt|px)?" height="(?P<h>[\d.]+)(?P<hu>pt|px)?"'
)


def fit_to_window(svg: bytes) -> bytes:
    """``svg`` with its root sized to the window and capped at its natural size.

    An SVG whose root has no numeric ``width``/``height`` (not Graphviz's) is returned
    unchanged.
    """
    found = _ROOT.search(svg, 0, 4096)
    if found is None or b"viewBox=" not in svg[found.start() : found.start() + 512]:
        return svg
    width = found["w"] + (found["wu"] or b"px")
    height = found["h"] + (found["hu"] or b"px")
    root = (
        b'<svg width="100%" height="100%" preserveAspectRatio="xMidYMin meet" '
        b'style="max-width:' + width + b";max-height:" + height + b'"'
    )
    return svg[: found.start()] + root + svg[found.end() :]

"""What a notebook that opens untrusted shows: the pictures drawn in plain HTML that JupyterLab's sanitizer
keeps (positioned divs, titles), beside the SVG that a trusted notebook shows."""
import re

import pytest

from tlx_workbench.widgets import (BarrierPhaseWidget, Picture, TimelineWidget, barrier_svg, svg_html,
                                   timeline_svg, untrusted_safe)
from tlx_workbench.widgets.sample import sample_trace

# what JupyterLab's sanitizer keeps of an untrusted output's HTML (its allowedTags, in brief): no svg, no style
SANITIZED_AWAY = ("<svg", "<rect", "<line", "<path", "<text", "<style", "<script")


@pytest.fixture(scope="module")
def trace():
    return sample_trace(iters=6, ctas=1, consumers=2, stages=2, seed=3)


def test_a_picture_in_plain_html_keeps_its_boxes_words_and_tooltips(trace):
    svg = timeline_svg(trace)
    page = svg_html(svg)
    assert not any(t in page for t in SANITIZED_AWAY)
    # every span drawn one by one in the SVG (those with a hover title) is a box with the same title
    titles = re.findall(r"<rect [^>]*>\s*<title>([^<]+)</title>", svg)
    assert titles and all(f"title='{t}'" in page.replace("&#x27;", "'") for t in titles[:20])
    assert page.count("position:absolute") >= svg.count("<rect") + svg.count("<text") - 1
    # the words are there once each, as words (not as a run of tooltips)
    assert "producer[0]" in page and "cycles" in page


def test_html_fallbacks_carry_the_plain_copy_shown_only_where_untrusted(trace):
    data, _ = TimelineWidget(trace)._repr_mimebundle_()
    h = data["text/html"]
    assert h.count("<svg") == 1 and "tlxwb-untrusted-picture" in h
    # the SVG sits in a box hidden by an inline style (which survives sanitizing); a scoped <style> (which does
    # not) shows it and hides the copy: trusted, the SVG shows; untrusted, the copy
    key = re.search(r"<div id='(tlxwb-p[0-9a-f]+)' class='tlxwb-picture'>", h).group(1)
    assert f"#{key}>.tlxwb-svgbox{{display:block!important}}" in h
    assert re.search(r"<div class='tlxwb-svgbox' style='display:none'><svg", h)
    # what an untrusted notebook renders: without <style>/<svg>, no words of the picture leak out of hiding
    visible = re.sub(r"<div class='tlxwb-svgbox' style='display:none'>.*?</svg></div>", "", h, flags=re.S)
    assert "<svg" not in visible and "tlxwb-untrusted-picture" in visible


def test_picture_is_an_svg_for_display_that_shows_untrusted_too(trace):
    bundle = Picture(barrier_svg(trace), "barrier phases")._repr_mimebundle_()
    assert bundle["image/svg+xml"].startswith("<svg")
    assert "tlxwb-untrusted-picture" in bundle["text/html"]
    assert "IPython" not in bundle["text/plain"] and "barrier phases" in bundle["text/plain"]
    assert untrusted_safe("<p>no picture</p>") == "<p>no picture</p>"
    BarrierPhaseWidget(trace).close()


@pytest.mark.browser
def test_the_plain_copy_draws_like_the_svg(show_static, trace):
    # the same picture twice on one page: the SVG and its copy cover the same boxes
    svg = barrier_svg(trace)
    page = show_static(f"<div id='a'>{svg}</div><div id='b'>{svg_html(svg)}</div>")
    a = page.locator("#a svg").bounding_box()
    b = page.locator("#b .tlxwb-untrusted-picture").bounding_box()
    assert (round(a["width"]), round(a["height"])) == (round(b["width"]), round(b["height"]))
    words = page.locator("#b").inner_text()
    assert "full_bars[0]" in words and "waits: consumer[0]" in words
    assert "barrier_wait" not in words                       # tooltips stay tooltips

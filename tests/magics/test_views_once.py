"""Each view of a %%tlx cell is drawn once: the live widget (its bundle carries the static form for
exports), or the static view when there is no widget; options spelt wrong get a suggestion."""
import torch

from magic_cells import TMA_REF, TMA_RELU


def _views(ran):
    """(widget bundles, static timeline/barrier/memory drawings) among the cell's outputs."""
    widgets = [o for o in ran.outputs if "application/vnd.jupyter.widget-view+json" in o.data]
    return widgets


def test_timeline_barriers_memory_each_drawn_once(run_cell, shell):
    ran = run_cell(f"%%tlx --sim --check {TMA_REF} --timeline --barriers --memory -o r\n" + TMA_RELU)
    assert ran.ok, ran.error
    widgets = _views(ran)
    assert len(widgets) == 3                      # timeline, barrier phases, memory map
    # the cell's own HTML leaves those views to the widgets ...
    cell_html = next(o.data["text/html"] for o in ran.outputs if "tlxwb-cell" in o.data.get("text/html", ""))
    marks = ("tlxwb-timeline-svg", "tlxwb-barrier-svg", "tlxwb-memmap-svg")
    for mark in marks:
        assert mark not in cell_html, mark
        # ... and each widget still carries its static drawing for nbconvert / GitHub, once
        assert sum(mark in w.data.get("text/html", "") for w in widgets) == 1, mark
    assert sum(mark in ran.html for mark in marks for _ in [0]) == 3
    # asked for afterwards as a plain object, the result still draws every view itself
    assert "tlxwb-timeline-svg" in shell.user_ns["r"]._repr_html_()


def test_a_plain_cell_shows_its_timeline_statically_once(run_cell):
    ran = run_cell(f"%%tlx --sim {TMA_REF}\n" + TMA_RELU)
    assert ran.ok, ran.error
    assert not _views(ran)
    assert ran.html.count("class='tlxwb-timeline-svg'") == 1


def test_misspelt_option_suggests_the_right_one_and_fails(run_cell):
    ran = run_cell("%%tlx --sim --chek\nnever = 1\n")
    assert not ran.ok and "did you mean --check?" in ran.html
    ran = run_cell("%%tlx --sim --timelime\nnever = 1\n")
    assert "did you mean --timeline?" in ran.html


def test_help_lists_every_other_magic_of_the_class(run_cell, shell):
    ran = run_cell("%%tlx --help\nran_anyway = 1\n")
    assert ran.ok and "ran_anyway" not in shell.user_ns
    for magic in ("%tlx_bench", "%tlx_profile", "%tlx_show", "%tlx_config"):
        assert magic in ran.stdout, magic
    assert "--no-raise" in ran.stdout
    # the list is read from the Magics class: a magic added to it later is listed too
    from tlx_workbench.magics import options
    from tlx_workbench.magics.ipython_magics import TLXMagics

    class More(TLXMagics):
        pass
    More.magics = {"cell": dict(TLXMagics.magics["cell"]),
                   "line": dict(TLXMagics.magics["line"], tlx_explore="tlx_show")}
    assert "%tlx_explore" in options.magics_list(More, skip="tlx")


def test_a_workbench_object_shown_in_a_notebook_keeps_its_pictures_for_an_untrusted_notebook(run_cell, shell):
    # what a plain cell ending in a result object stores: its HTML, with a plain-HTML copy of each picture
    from tlx_workbench.widgets.sample import sample_trace
    from tlx_workbench.magics.result import CellResult
    shell.user_ns["res"] = CellResult(mode="sim", target="", trace=sample_trace(iters=3, ctas=1, seed=2),
                                      show=("timeline",))
    html = shell.display_formatter.format(shell.user_ns["res"])[0]["text/html"]
    assert html.count("<svg") >= 1 and html.count("tlxwb-untrusted-picture") == html.count("<svg")
    # another library's HTML is left as it is
    class Other:
        def _repr_html_(self):
            return "<svg width='2' height='2'></svg>"
    assert shell.display_formatter.format(Other())[0]["text/html"] == "<svg width='2' height='2'></svg>"
    # and display(SVG(...)), the IPython habit: HTML beside the SVG, which an untrusted notebook renders
    from IPython.display import SVG
    from tlx_workbench.widgets import timeline_svg
    data = shell.display_formatter.format(SVG(timeline_svg(shell.user_ns["res"].trace)))[0]
    assert "image/svg+xml" in data and "tlxwb-untrusted-picture" in data["text/html"]

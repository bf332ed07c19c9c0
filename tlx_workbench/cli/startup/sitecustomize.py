"""Switches a plain ``python`` onto the simulator when ``TLXWB_SIM`` is set, as ``TRITON_INTERPRET=1`` switches
Triton's interpreter on: Python imports ``sitecustomize`` at start-up from the folders on ``PYTHONPATH``, and
``eval "$(tlx-workbench env --sim H200)"`` puts this folder there (``tlx_workbench.cli.run.simulate_this_process``
does the work). Any other ``sitecustomize`` further along ``sys.path`` still runs, after this one."""
import os
import sys


def _chain():
    # the sitecustomize this one hides (one further along sys.path), run as Python would have run it
    import importlib.machinery
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)


if os.environ.get("TLXWB_SIM"):
    try:
        from tlx_workbench.cli.run import simulate_this_process
        simulate_this_process(os.environ["TLXWB_SIM"])
    except Exception as e:  # noqa: BLE001 - a start-up hook must not stop the interpreter
        sys.stderr.write(f"tlx-workbench: TLXWB_SIM={os.environ['TLXWB_SIM']} could not switch the simulator on: "
                         f"{type(e).__name__}: {e}\n")
_chain()

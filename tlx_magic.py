"""``%load_ext tlx_magic``: the TLX Workbench magics (%%tlx, %tlx_bench, ...)."""


def load_ipython_extension(ipython):
    from tlx_workbench.magic import load_ipython_extension as _load
    _load(ipython)


def unload_ipython_extension(ipython):
    from tlx_workbench.magic import unload_ipython_extension as _unload
    _unload(ipython)

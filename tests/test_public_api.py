"""The short public API: every name resolves, and stays a function after its module is imported."""
import importlib

import tlx_workbench as wb


def test_every_lazy_name_resolves():
    for name in wb._LAZY:
        assert getattr(wb, name) is not None, name


def test_verbs_stay_callable_after_their_packages_are_imported():
    for mod in set(wb._LAZY.values()):
        importlib.import_module(mod)         # binds the subpackage on tlx_workbench
    for verb in ("compile", "simulate", "check", "run", "bench", "profile", "advise_warp_barriers"):
        fn = getattr(wb, verb)
        assert callable(fn) and not isinstance(fn, type(wb)), verb

"""An autotuned kernel whose own configs form the space: TLX's tutorial `hopper_gemm_ws`, unchanged,
explored through its own launcher; the explorer imposes each config (its pre_hook too)."""
import tutorial_problem as tp
from tlx_workbench.explore import Space, explore


def test_the_tutorials_own_configs_are_explored_through_its_own_launcher(tmp_path):
    cfgs = tp.configs(4)
    space = Space.of(cfgs)
    assert len(space) == 4 and all("pre_hook" not in c for c in space)
    ex = explore(tp.problem(), space, shapes=[(1024, 1024, 1024)], stages=("static", "simulated"),
                 store=tmp_path / "s.sqlite", backend="process", workers=2, progress=False)
    entries = ex.entries()
    assert len(entries) == 4
    for e in entries:
        assert e["status"] == "simulated", (e["config"], e["reason"])
        assert e["sim_rel_err"] < 1e-2                       # the pre_hook's block shapes were applied
    # each config compiled as itself: tiles and stages reach the compiled kernel
    smem = {(e["config"]["BM"], e["config"]["BN"], e["config"]["NUM_STAGES"]): e["smem_bytes"] for e in entries}
    assert len(set(smem.values())) == len(smem)

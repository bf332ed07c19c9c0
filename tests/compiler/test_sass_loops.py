"""compiler.sass_loops: where a kernel's register spills run, read off its SASS's loops.

The cost model charges a spilling kernel's local loads and stores once per iteration of its wgmma loop; ptxas's
spill figures count every LDL / STL of the code, the prologue's and epilogue's too. The reading must find the
loop a consumer warp group runs per k-step or KV block, and not mistake an mbarrier wait's out-of-line retry path
(placed at the end of the function, branching back) for a loop around the code between."""
import re

import pytest
from tutorial_cases import case

import tlx_workbench as wb
from tlx_workbench.compiler import sass_loops
from tlx_workbench.compiler.occupancy import spill_loads, spill_stores

# a consumer's shape in SASS: a prologue that zeroes a spilled accumulator, a wait whose retry path sits at the end
# of the function and branches back to the instruction after the wait, then the k-step loop (a reload, two wgmmas,
# a store back, a second wait with its retry path), then an epilogue reload
SYNTHETIC = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   STL.128 [R1], RZ ;
        /*0020*/                   STL.64 [R1+0x10], RZ ;
        /*0030*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R2+URZ], R3 ;
        /*0040*/               @!P0 BRA `(.L_x_7) ;
.L_x_8:
        /*0050*/                   IADD3 R4, R4, 0x1, RZ ;
.L_x_2:
        /*0060*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [R2+URZ+0x8], R3 ;
        /*0070*/               @!P1 BRA `(.L_x_9) ;
.L_x_10:
        /*0080*/                   LDL.64 R8, [R1+0x10] ;
        /*0090*/                   WARPGROUP.ARRIVE ;
        /*00a0*/                   HGMMA.64x128x16.F32 R24, gdesc[UR4], R24 ;
        /*00b0*/                   HGMMA.64x128x16.F32 R24, gdesc[UR8], R24, gsb0 ;
        /*00c0*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*00d0*/                   STL [R1+0x18], R9 ;
        /*00e0*/                   ISETP.NE.AND P2, PT, R4, R5, PT ;
        /*00f0*/               @P2 BRA `(.L_x_2) ;
        /*0100*/                   LDL.128 R12, [R1] ;
        /*0110*/                   EXIT ;
.L_x_7:
        /*0120*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R2+URZ], R3 ;
        /*0130*/               @!P0 BRA `(.L_x_7) ;
        /*0140*/                   BRA `(.L_x_8) ;
.L_x_9:
        /*0150*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [R2+URZ+0x8], R3 ;
        /*0160*/               @!P1 BRA `(.L_x_9) ;
        /*0170*/                   BRA `(.L_x_10) ;
"""


def test_the_k_step_loop_is_found_and_the_retry_paths_are_loops_of_their_own():
    instrs, labels = sass_loops._read(SYNTHETIC)
    found = {h: body for h, body in sass_loops.loops(SYNTHETIC)}
    sizes = sorted(len(b) for b in found.values())
    # the two retry paths (TRYWAIT + its branch back) and the k-step loop (its wait, the wait's retry path, the
    # reload, the wgmmas, the store, the back branch): nothing before the loop, nothing after it
    assert sizes == [2, 2, 13], found
    loop = max(found.values(), key=len)
    assert labels[".L_x_2"] in loop and labels[".L_x_9"] in loop
    assert not loop & {0, 1, 2, 3, 4, 5, labels[".L_x_8"]}
    assert next(i for i, ins in enumerate(instrs) if ins.opcode == "LDL.128") not in loop


def test_the_placement_counts_the_loop_once_and_the_rest_not_per_iteration():
    p = sass_loops.spill_placement(SYNTHETIC)
    assert (p.loads, p.stores) == (8 + 16, 16 + 8 + 4)
    assert (p.loop_loads, p.loop_stores, p.loops) == (8, 4, 1)
    assert p.per_iteration == 12 and p.loop_wgmmas == 2 and p.per_wgmma == 6
    assert str(p) == "8 + 4 B in the wgmma loop's body, 2 wgmma instructions: 6 B a wgmma"


def test_a_kernel_without_a_wgmma_loop_keeps_its_whole_spill_count():
    text = SYNTHETIC.replace("HGMMA.64x128x16.F32", "FFMA")
    p = sass_loops.spill_placement(text)
    assert p.loops == 0 and p.per_iteration == p.loads + p.stores == 52
    assert sass_loops.spill_placement("") == sass_loops.SpillPlacement(0, 0, 0, 0, 0)


@pytest.fixture(scope="module")
def fa_ws_one_group():
    """TLX's hopper_fa_ws with its first config (one consumer warp group, 128 x 128: it spills), compiled offline."""
    kernel, args, kw, target = case("hopper_fa_ws")
    return wb.compile(kernel, *args, target=target, **dict(kw, config=0))


def test_a_real_spilling_kernel_the_totals_are_ptxas_and_the_loop_is_the_kv_loop(fa_ws_one_group):
    report = fa_ws_one_group
    loads, stores = spill_loads(report.ptxas_advisories), spill_stores(report.ptxas_advisories)
    assert loads > 0 and stores > 0
    p = sass_loops.spill_placement(report.sass)
    assert (p.loads, p.stores) == (loads, stores)
    assert p.loops >= 1
    # the KV loop reloads and stores back part of the spilled state, not all of it: the prologue zeroes it
    assert 0 < p.loop_loads < loads and 0 < p.loop_stores < stores
    # an independent count: the LDL / STL between the wgmma loop's head label and its backward branch, in address
    # order (the retry paths out of line at the end of the function hold no local loads or stores)
    instrs, labels = sass_loops._read(report.sass)
    wgmma = [i for i, ins in enumerate(instrs) if ins.opcode.startswith("HGMMA")]
    backs = [(labels[m.group(1)], i) for i, ins in enumerate(instrs) if ins.opcode.startswith("BRA")
             for m in [re.search(r"\((\.L\w+)\)", ins.operands)] if m and labels.get(m.group(1), i + 1) <= i]
    head, tail = min(((h, b) for h, b in backs if h <= wgmma[0] <= b and h <= wgmma[-1] <= b),
                     key=lambda hb: hb[1] - hb[0])
    span = instrs[head:tail + 1]
    assert sass_loops._local_bytes(span, "LDL") == p.loop_loads
    assert sass_loops._local_bytes(span, "STL") == p.loop_stores


def test_predict_charges_the_loop_spills_per_iteration_and_says_so(fa_ws_one_group):
    from tlx_workbench.sim.timing.prediction import loop_spills
    report = fa_ws_one_group
    total = spill_loads(report.ptxas_advisories) + spill_stores(report.ptxas_advisories)
    spills, where = loop_spills(report, total)
    p = sass_loops.spill_placement(report.sass)
    # per wgmma instruction: QK^T and PV, 2 x 8 m64n128k16 each, 32 instructions an iteration of the KV loop
    assert p.loop_wgmmas == 32
    assert spills == pytest.approx((p.loop_loads + p.loop_stores) / 32) and spills * 32 < total
    assert "in the wgmma loop's body, 32 wgmma instructions" in where
    assert loop_spills(report, 0) == (0, "")


def test_an_unrolled_loop_is_counted_per_wgmma_instruction_not_per_pass():
    """ptxas unrolls the calibration's spilling wgmma loop (one async_dot of 128 x 256 x 64: 8 wgmma instructions
    an iteration): a body of four iterations and a remainder loop of one. The bytes per wgmma instruction are the
    body's over its 32 instructions, near the remainder loop's over its 8, where the body's bytes are four
    iterations' spills."""
    from tlx_workbench.calibration import suite
    p = suite.spill_loop_placement(128, 256, 1)
    sass = _spill_loop_sass()
    instrs, labels = sass_loops._read(sass)
    wg = {i for i, ins in enumerate(instrs) if ins.base == "HGMMA"}
    found = [b for _, b in sass_loops.loops(sass) if b & wg]
    inner = [b for b in found if not any(o < b for o in found)]          # loops holding no smaller wgmma loop
    counts = sorted(len(b & wg) for b in inner)
    assert p.loop_wgmmas == max(counts) and p.loop_wgmmas % 8 == 0 and p.loop_wgmmas > 8
    assert min(counts) == 8                                 # the remainder loop: one iteration
    assert p.per_iteration > 2 * p.per_wgmma * 8            # per pass: several iterations' bytes
    rest = [b for b in inner if len(b & wg) == 8]
    one = sum(sass_loops._local_bytes((instrs[i] for i in sorted(b)), k) for b in rest[:1] for k in ("LDL", "STL"))
    assert p.per_wgmma * 8 == pytest.approx(one, rel=0.2)


def _spill_loop_sass():
    from tlx_workbench.calibration import kernels as K
    from tlx_workbench.calibration import suite
    a, b, out, rec = suite.mma_tensors("float16", 256, 1, 1, 128, "cpu")
    return wb.compile(K.mma_loop_kernel, a, b, out, rec, 1000, target="H200", BM=128, BN=256, BK=64, CONSUMERS=1,
                      IN_FLIGHT=2, TIMED=True, num_warps=4).sass


def test_the_report_says_where_its_spills_run(fa_ws_one_group):
    report = fa_ws_one_group
    p = report.spill_placement
    said = f"spill code {p.loads} B loaded + {p.stores} B stored; {p.loop_loads} + {p.loop_stores} B in the wgmma loop"
    assert said in str(report)
    assert said in report._repr_html_()

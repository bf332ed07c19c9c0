"""ptxas's -v log on the CompileReport: advisories (C7513 & co.) explained, per-function numbers,
the log kept from the compile we already run (no second ptxas), stored beside Triton's cached
cubin, and the one tie to Triton's make_cubin that must fail loudly when Triton changes."""
import inspect
import os
import threading

import pytest

import tlx_workbench as wb
from tlx_workbench.compiler import clear_cache, triton_ptxas
from tlx_workbench.compiler.ptxas_log import parse

from spill_kernel import many_live_values
from wgmma_kernels import SIGNATURE, chained_dots

# ---- real ptxas 12.9 logs (sm_90a), cut short -------------------------------------------------
ATTENTION_P_EARLY = """\
ptxas info    : (C7513) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma instructions defining input registers of a wgmma between start and end of the pipeline stage in the function 'attention_fwd_persistent_kernel'
ptxas info    : 11 bytes gmem
ptxas info    : Compiling entry function 'attention_fwd_persistent_kernel' for 'sm_90a'
ptxas info    : Function properties for attention_fwd_persistent_kernel
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 168 registers, used 16 barriers
ptxas info    : Compile time = 599.518 ms
"""
SPILLS = """\
ptxas info    : 52 bytes gmem
ptxas info    : Compiling entry function 'many_live_values' for 'sm_90a'
ptxas info    : Function properties for many_live_values
    448 bytes stack frame, 576 bytes spill stores, 1108 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 448 bytes cumulative stack size
ptxas info    : Compile time = 300.394 ms
"""
SETMAXNREG_IGNORED = """\
ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; unable to determine register count at entry.
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k' for 'sm_90a'
ptxas info    : Function properties for k
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 4 registers, used 0 barriers
"""
PTX_LINE_WARNING = """\
ptxas d.ptx, line 12; warning : Instruction 'vote' without '.sync' is deprecated since PTX ISA version 6.0 and will be discontinued in a future PTX ISA version
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k' for 'sm_60'
ptxas info    : Function properties for k
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 4 registers, used 0 barriers, 328 bytes cmem[0]
"""
SETMAXNREG_FATAL = """\
ptxas application ptx input, line 9; fatal   : (C7406) setmaxnreg.dec has register count (160) which is larger than the largest temporal register count in the program (128)
ptxas fatal   : Ptx assembly aborted due to errors
"""


def test_c7513_is_explained_with_what_to_do():
    log = parse(ATTENTION_P_EARLY)
    [a] = log.advisories
    assert (a.code, a.severity, a.function) == ("C7513", "warning", "attention_fwd_persistent_kernel")
    assert a.message.startswith("Potential Performance Loss: wgmma.mma_async instructions are serialized")
    assert "in flight" in a.explanation and "async_dot_wait" in a.hint
    [fn] = log.functions
    assert (fn.name, fn.registers, fn.barriers, fn.stack_bytes, fn.spill_store_bytes) == (
        "attention_fwd_persistent_kernel", 168, 16, 0, 0)


def test_spills_become_an_advisory_with_the_numbers():
    log = parse(SPILLS)
    [a] = log.advisories
    assert (a.code, a.severity, a.function) == ("spills", "warning", "many_live_values")
    assert "576 bytes spill stores, 1108 bytes spill loads" in a.message and a.hint
    fn = log.functions[0]
    assert (fn.registers, fn.stack_bytes, fn.spill_store_bytes, fn.spill_load_bytes) == (32, 448, 576, 1108)


def test_setmaxnreg_ignored_is_explained():
    [a] = parse(SETMAXNREG_IGNORED).advisories
    assert a.code == "C7508" and a.known and "maxnreg" in a.hint


def test_line_messages_keep_their_ptx_line_and_unknown_ones_stay_verbatim():
    [a] = parse(PTX_LINE_WARNING).advisories
    assert (a.code, a.severity, a.ptx_line, a.known) == ("", "warning", 12, False)
    assert a.message.startswith("Instruction 'vote' without '.sync' is deprecated")
    fatal = parse(SETMAXNREG_FATAL).advisories
    assert [(x.code, x.severity, x.ptx_line) for x in fatal] == [("C7406", "error", 9), ("", "error", None)]
    assert fatal[0].known and not fatal[1].known
    made_up = "ptxas info    : (C7999) Potential Performance Loss: something new in the function 'k'"
    [u] = parse(made_up).advisories
    assert (u.code, u.severity, u.function, u.known) == ("C7999", "warning", "k", False)
    assert u.message == "Potential Performance Loss: something new in the function 'k'"


def test_a_clean_log_has_no_advisories():
    clean = ATTENTION_P_EARLY.split("\n", 1)[1]
    assert parse(clean).advisories == [] and parse("").advisories == []


def test_a_ptxas_failure_names_its_first_error_and_what_to_do():
    from triton.runtime.errors import PTXASError
    from tlx_workbench.compiler.diagnose import compile_error
    from tlx_workbench.target import gpu_model
    e = PTXASError(f"`ptxas` failed with error code 255\n`ptxas` stderr:\n{SETMAXNREG_FATAL}\nRepro command: ptxas ...\n")
    err = compile_error(e, chained_dots, gpu_model("sm_90"))
    assert "[C7406] setmaxnreg.dec has register count (160)" in err.message
    assert "registers=" in err.hint and err.file == chained_dots.file_name


# ---- the tie to Triton's make_cubin ---------------------------------------------------------
def test_triton_make_cubin_is_what_the_capture_expects():
    """If this fails, Triton changed how it runs ptxas: update triton_ptxas.py (the only module
    that depends on it) before anything else."""
    from triton.backends.nvidia import compiler as nv
    original = inspect.unwrap(nv.CUDABackend.make_cubin)
    assert list(inspect.signature(original).parameters) == ["self", "src", "metadata", "opt", "capability"]
    src = inspect.getsource(original)
    assert "subprocess.run(" in src and "stderr=flog" in src and "'-v'" in src, \
        "make_cubin no longer runs `ptxas -v` with stderr to a log file through subprocess.run"
    assert "tempfile.NamedTemporaryFile" in src


@pytest.fixture
def fresh_triton_cache(tmp_path, monkeypatch):
    """An empty Triton disk cache, an empty in-memory report cache and empty JIT caches of the attention kernels
    (``kernel.warmup`` answers a specialisation this process compiled before, another test's under xdist, from
    ``device_caches`` without ptxas): ptxas really runs."""
    from tlx_workbench.kernels import attention_kernel
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    clear_cache()
    for jit in (attention_kernel.attention_fwd_kernel, attention_kernel.attention_fwd_persistent_kernel):
        jit.device_caches.clear()
    yield tmp_path / "triton-cache"
    clear_cache()


def _compile_chained(early: bool):
    return wb.compile(chained_dots, signature=SIGNATURE, ITERS=2, EARLY=early, BK=128, num_warps=4,
                      num_stages=0, target="sm_90")


def test_capture_reads_the_log_of_the_compile_without_a_second_ptxas(fresh_triton_cache, monkeypatch):
    from triton.backends.nvidia import compiler as nv
    runs = []
    triton_ptxas.install()
    real_run = nv.subprocess._real.run

    def counting_run(cmd, *a, **k):
        if triton_ptxas._is_ptxas(cmd):
            runs.append(cmd)
        return real_run(cmd, *a, **k)

    monkeypatch.setattr(nv.subprocess._real, "run", counting_run)
    r = _compile_chained(early=True)
    assert len(runs) == 1, "the report must come from the ptxas run Triton already makes"
    assert r._ptxas_job is None and "Compiling entry function 'chained_dots'" in r.ptxas_log
    assert r.ptxas_functions[0].registers == r.resources.registers


def test_c7513_appears_for_a_conversion_under_an_inflight_wgmma_and_not_after_the_wait(fresh_triton_cache):
    early, late = _compile_chained(early=True), _compile_chained(early=False)
    assert [a.code for a in early.ptxas_advisories] == ["C7513"]
    assert late.ptxas_advisories == []
    [a] = early.ptxas_advisories
    with open(chained_dots.fn.__code__.co_filename) as f:
        wgmma_line = 1 + next(i for i, t in enumerate(f) if "acc = tlx.async_dot(p, b_smem[0], acc)" in t)
    assert a.line == wgmma_line and f"line {wgmma_line}" in a.hint      # the wgmma reading P from registers
    text, html = repr(early), early._repr_html_()
    assert "[C7513]" in text and "what to do:" in text and "async_dot_wait" in text
    assert "C7513" in html and "ptxas advisories" in html and "ptxas log" in html
    assert "ptxas advisories" not in repr(late)
    assert early.to_dict()["ptxas_advisories"][0]["code"] == "C7513"


def test_spilling_kernel_reports_spills(fresh_triton_cache):
    r = wb.compile(many_live_values, signature={"x_ptr": "*fp32:16", "y_ptr": "*fp32:16", "n": "i32"},
                   BLOCK=1024, num_warps=1, target="sm_90", config={"maxnreg": 32})
    [a] = [a for a in r.ptxas_advisories if a.code == "spills"]
    assert a.function == "many_live_values" and "spill stores" in a.message
    assert r.ptxas_functions[0].stack_bytes == r.resources.local_bytes > 0
    assert "spills" in repr(r)


def test_triton_disk_cache_hit_reads_the_stored_log_and_reruns_only_without_one(fresh_triton_cache):
    first = _compile_chained(early=True)
    [stored] = [os.path.join(d, f) for d, _, fs in os.walk(fresh_triton_cache) for f in fs
                if f == "chained_dots.ptxas.log"]
    with open(stored) as f:
        assert f.read() == first.ptxas_log
    clear_cache()
    hit = _compile_chained(early=True)            # served by Triton's disk cache: no ptxas ran
    assert hit is not first and hit._ptxas_job is None
    assert [a.code for a in hit.ptxas_advisories] == ["C7513"]
    # a cache entry made without the workbench has no log: ptxas runs once, when asked
    os.remove(stored)
    clear_cache()
    bare = _compile_chained(early=True)
    assert bare._ptxas_job is not None and bare._ptxas_log is None
    assert [a.code for a in bare.ptxas_advisories] == ["C7513"]
    assert os.path.exists(stored)


def test_threads_get_their_own_logs(fresh_triton_cache):
    """Capture is per thread: two compiles at once each see only their own ptxas run."""
    import triton
    from triton.compiler import ASTSource
    from tlx_workbench.target import gpu_model, offline
    model = gpu_model("sm_90")
    gate = threading.Barrier(2)
    logs, errors = {}, []

    def work(early):
        try:
            types = {k: v.split(":")[0] for k, v in SIGNATURE.items()}
            src = ASTSource(chained_dots, {**types, "ITERS": "constexpr", "EARLY": "constexpr", "BK": "constexpr"},
                            {(3,): 2, (4,): early, (5,): 128})
            gate.wait()
            with triton_ptxas.capture() as cap:
                triton.compile(src, target=model.gpu_target(), options={"num_warps": 4, "num_stages": 0})
            logs[early] = cap.logs
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(e,)) for e in (True, False)]
    with offline(model):        # one driver for both threads (offline() is a process-wide stack)
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors
    assert len(logs[True]) == len(logs[False]) == 1
    assert "C7513" in logs[True][0] and "C7513" not in logs[False][0]


# ---- the real kernel: our attention's default, compiled through the JIT path ---------------------
def test_attention_default_config_compiles_without_advisories_through_the_jit_path(fresh_triton_cache):
    from tlx_workbench.kernels import attention
    with triton_ptxas.capture() as cap:
        attention.compile_offline(attention.CONFIGS[0], shape=(1, 2, 4096, 128))
    assert cap.log is not None, "the JIT path (kernel.warmup) must be captured too"
    assert "Compiling entry function 'attention_fwd_persistent_kernel'" in cap.log
    assert [a.code for a in parse(cap.log).advisories] == []

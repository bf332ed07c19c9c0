"""TLX's ``test_correctness.py`` under the pytest plugin on a many-core machine's CPUs, in parallel (pytest-xdist).

The Blackwell GEMM tests (4096^3 and 8192^3 each) take ~15 min of one core each; this 2-core box would need hours
for the twelve. The H200 host has 16 cores: there the GPU is hidden (``CUDA_VISIBLE_DEVICES=``), so the run is the
same CPU simulation as here, one test per worker. The run goes on in its own process session between device calls
(a call returns after at most 10 min), writing its JSON table after every test.

    source .gpu/env.sh && python3 benchmarks/tlx_suite/sim_on_host.py start --gpu B200 -k "blackwell and gemm" -n 12
    ...                                                                        # other work on the same machine
    source .gpu/env.sh && python3 benchmarks/tlx_suite/sim_on_host.py wait --seconds 500     # copies to $OUT

The Blackwell ptxas (dropped from the GPU bundle to fit it) travels xz-compressed in ``.gpuextra/`` (carry it):
without it every sm_100 compile fails and every test would be "compiler refused".
"""
from __future__ import annotations

import argparse
import json
import lzma
import os
import pathlib
import shutil
import subprocess
import sys
import time

WORK = pathlib.Path(os.environ.get("TLXSIM_WORK", "/tmp/tlxsim"))
REPO = pathlib.Path(__file__).resolve().parents[2]


def _ptxas_blackwell(env):
    src = REPO / ".gpuextra" / "ptxas-blackwell.xz"
    if not src.exists():
        return "no .gpuextra/ptxas-blackwell.xz: the wheel's own ptxas-blackwell, if any"
    dst = WORK / "ptxas-blackwell"
    with lzma.open(src) as f, open(dst, "wb") as g:
        shutil.copyfileobj(f, g)
    dst.chmod(0o755)
    env["TRITON_PTXAS_BLACKWELL_PATH"] = str(dst)
    return str(dst)


def start(args):
    import tlx
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "pytest.ini").write_text("[pytest]\n")        # not the workbench's own ini (nbval options)
    suite = pathlib.Path(tlx.__file__).parent / "tutorials" / "testing" / "test_correctness.py"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1", "TRITON_CACHE_DIR": str(WORK / "triton-cache"),
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    ptxas = _ptxas_blackwell(env)
    report = WORK / f"{args.gpu}.json"
    cmd = [sys.executable, "-m", "pytest", "-c", str(WORK / "pytest.ini"), "--rootdir", str(WORK), str(suite),
           "-p", "tlx_workbench.pytest_plugin", f"--tlx-sim={args.gpu}", f"--tlx-sim-deadline={args.deadline}",
           f"--tlx-sim-report={report}", "-p", "no:cacheprovider", "-v", "-n", str(args.n)]
    if args.k:
        cmd += ["-k", args.k]
    log = open(WORK / f"{args.gpu}.log", "w")
    proc = subprocess.Popen(cmd, cwd=WORK, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    meta = {"pid": proc.pid, "cmd": cmd, "ptxas_blackwell": ptxas, "started": time.time(),
            "started_utc": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "cpus": os.cpu_count(),
            "cpu": _cpu_name()}
    (WORK / f"{args.gpu}.meta.json").write_text(json.dumps(meta, indent=1))
    print(json.dumps(meta, indent=1))


def _cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:        # a zombie (our child only when started in this process) counts as ended
        return open(f"/proc/{pid}/stat").read().split()[2] != "Z"
    except OSError:
        return False


def wait(args):
    out = pathlib.Path(os.environ.get("OUT", "."))
    t_end = time.time() + args.seconds
    metas = sorted(WORK.glob("*.meta.json"))
    while time.time() < t_end and any(_alive(json.loads(m.read_text())["pid"]) for m in metas):
        time.sleep(5)
    for m in metas:
        meta = json.loads(m.read_text())
        gpu = m.name.split(".")[0]
        meta["alive"] = _alive(meta["pid"])
        meta["elapsed_s"] = round(time.time() - meta["started"], 1)
        (out / m.name).write_text(json.dumps(meta, indent=1))
        for suffix in (".json", ".log"):
            f = WORK / f"{gpu}{suffix}"
            if f.exists():
                shutil.copy(f, out / f.name)
        rep = WORK / f"{gpu}.json"
        if rep.exists():
            data = json.loads(rep.read_text())
            print(gpu, "complete" if data.get("complete") else "partial", data["counts"],
                  f"elapsed {meta['elapsed_s']} s, alive={meta['alive']}")
            for t in data["tests"]:
                print(f"  {t['test'].split('::')[-1]:<48} {t['status']:<20} {t['seconds']:8.1f} s  {t['why'] or ''}")
        else:
            print(gpu, "no table yet", f"elapsed {meta['elapsed_s']} s, alive={meta['alive']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    s = sub.add_parser("start")
    s.add_argument("--gpu", default="B200")
    s.add_argument("-k", default="blackwell and gemm")
    s.add_argument("-n", type=int, default=12)
    s.add_argument("--deadline", type=float, default=3000)
    w = sub.add_parser("wait")
    w.add_argument("--seconds", type=float, default=500)
    args = ap.parse_args()
    (start if args.what == "start" else wait)(args)


if __name__ == "__main__":
    main()

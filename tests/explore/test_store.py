"""The results store and the space: what a sweep's resumability and its readers rely on."""
import json
import multiprocessing
import os
import subprocess
import sys
import textwrap

import pytest

from tlx_workbench.explore import Row, Space, Store, config_id


def test_space_of_knobs_keeps_what_the_constraints_allow_and_counts_the_rest():
    s = Space({"BM": [64, 128, 256], "STAGES": [2, 3, 4]}, constraints=[lambda c: c["BM"] * c["STAGES"] <= 512],
              fixed={"GROUP_M": 8}, seeds=[{"BM": 256, "STAGES": 4}])
    assert all(c["GROUP_M"] == 8 for c in s[:-1])
    assert {(c["BM"], c["STAGES"]) for c in s} == {(64, 2), (64, 3), (64, 4), (128, 2), (128, 3), (128, 4),
                                                   (256, 2), (256, 4)}
    assert sum(s.excluded.values()) == 2          # (256, 3) is excluded; the seed (256, 4) is kept as given
    assert s[-1] == {"BM": 256, "STAGES": 4}       # and `fixed` leaves it as given too
    assert config_id({"a": 1, "b": 2}) == config_id({"b": 2, "a": 1}) != config_id({"a": 1, "b": 3})


def test_space_of_triton_configs_flattens_launch_options():
    import triton
    s = Space([triton.Config({"BM": 64}, num_warps=4, num_stages=2), triton.Config({"BM": 128}, num_warps=8)])
    assert s[0]["num_warps"] == 4 and s[0]["BM"] == 64 and s[1]["num_warps"] == 8


def test_an_empty_space_says_which_constraint_emptied_it():
    from tlx_workbench.errors import TLXWorkbenchError

    def never(c):
        return False
    with pytest.raises(TLXWorkbenchError, match="empty") as ei:
        Space({"BM": [64]}, constraints=[never])
    assert "never" in ei.value.hint


def _row(i, stage="static"):
    return Row(key=f"k{i}", kernel="gemm", config={"BM": 64 * (i % 3 + 1), "i": i}, shape=[128, 128, 64],
               stage=stage, status="ok" if i % 4 else "dropped", reason=None if i % 4 else "too big",
               metrics={"smem_bytes": 1000 + i})


def test_rows_survive_a_reopen_and_a_put_replaces_by_key(tmp_path):
    path = tmp_path / "s.sqlite"
    st = Store(path)
    for i in range(10):
        st.put(_row(i))
    st.put(_row(3, "static"))
    st.close()
    again = Store(path)
    assert len(again) == 10
    assert again.get("k3").metrics == {"smem_bytes": 1003}
    assert again.get("k0").status == "dropped" and again.get("k0").reason == "too big"
    assert again.has(["k1", "k2", "nope"]) == {"k1", "k2"}
    assert [r.key for r in again.rows(status="dropped")] == ["k0", "k4", "k8"]


def test_a_bad_row_is_refused_before_it_reaches_the_file(tmp_path):
    st = Store(tmp_path / "s.sqlite")
    st.put(_row(1))
    with pytest.raises(ValueError):
        st.put(Row(key="x", kernel="gemm", config={}, shape=[1], stage="guessed", status="ok"))
    assert len(st) == 1


def test_a_second_process_reads_while_this_one_writes(tmp_path):
    """WAL: the reader sees committed rows as they land, without blocking the writer."""
    path = tmp_path / "s.sqlite"
    st = Store(path)
    st.put(_row(0))
    reader = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from tlx_workbench.explore import Store
        st = Store({str(path)!r}, readonly=True)
        seen = []
        for line in sys.stdin:                # one line per row the writer committed
            seen.append(len(st))
            print(seen[-1], flush=True)
        """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    counts = []
    for i in range(1, 8):
        st.put(_row(i))
        reader.stdin.write("next\n")
        reader.stdin.flush()
        counts.append(int(reader.stdout.readline()))
    reader.stdin.close()
    assert reader.wait(30) == 0
    assert counts == list(range(2, 9))


def test_has_can_leave_out_rows_of_a_status(tmp_path):
    st = Store(tmp_path / "s.sqlite")
    st.put(_row(1))
    st.put(Row(key="broken", kernel="gemm", config={}, shape=[1], stage="static", status="error",
               reason="the static stage failed: OSError"))
    assert st.has(["k1", "broken"]) == {"k1", "broken"}
    assert st.has(["k1", "broken"], except_status=("error",)) == {"k1"}


def test_a_reader_that_opens_the_file_before_its_schema_sees_an_empty_store_then_the_rows(tmp_path):
    """A live plot or a watcher started with its sweep can open the file in the moment the writer has
    created it but not yet committed the tables (CI hit this): it reads an empty store, not an error."""
    import sqlite3
    path = tmp_path / "s.sqlite"
    sqlite3.connect(path).close()                  # what a writer's connect leaves before its schema lands
    reader = Store(path, readonly=True)
    assert len(reader) == 0 and reader.rows() == [] and reader.get("k1") is None
    assert reader.has(["k1"]) == set() and reader.sweeps() == [] and "0 rows" in repr(reader)
    writer = Store(path)
    for i in range(3):
        writer.put(_row(i))
    assert len(reader) == 3 and reader.get("k1").metrics == {"smem_bytes": 1001}


def test_a_sqlite_file_that_is_not_a_store_is_named_as_such(tmp_path):
    import sqlite3
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (x TEXT)")
    with pytest.raises(ValueError, match="not a tlx_workbench results store.*notes"):
        len(Store(path, readonly=True))

"""The results store: one SQLite file, one row per config x shape x stage.

Rows are keyed by a hash of what decides the result (the kernel's source, the config, the
shape, the stage, the compiler versions and the target or device), so a re-run finds what
is known and skips it, and a sweep killed half-way resumes where it stopped: every row is
committed as it arrives. The file is in WAL mode: the sweep writes, and any number of
readers (a second notebook, a dashboard) read it while it does.

>>> st = Store(":memory:")
>>> st.put(Row(key="k1", kernel="gemm", config={"BM": 128}, shape=[64, 64, 64], stage="static", status="ok",
...            metrics={"smem_bytes": 1024}))
>>> st.get("k1").metrics["smem_bytes"], len(st)
(1024, 1)
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sqlite3
import threading
import time
from typing import Iterable

from .space import config_id, config_json

STAGES = ("static", "simulated", "measured")
# what a row can say about its config at its stage
STATUSES = ("ok", "dropped", "hung", "crashed", "error", "skipped")
SCHEMA_VERSION = 1

_COLUMNS = ("key", "sweep", "kernel", "source_hash", "config_id", "config", "shape", "stage", "status", "reason",
            "file", "line", "diagnosis", "metrics", "device", "env", "seconds", "created")
_JSON = {"config", "shape", "metrics", "env"}


@dataclasses.dataclass
class Row:
    """One result: a config at a shape, through one stage.

    ``status``: ok | dropped (the stage proved it unusable: over budget, a deadlock, a race,
    a wrong result) | hung | crashed (measured: the watchdog killed or lost the worker) |
    error (the stage itself failed) | skipped. ``reason`` is one sentence; ``file``/``line``
    the kernel source line it names; ``diagnosis`` the full text (a wait-for graph, the
    compiler's message). ``metrics`` holds the stage's figures (static: smem_bytes,
    registers, spills, ctas_per_sm, ...; simulated: cycles, predicted_us, ...; measured: ms,
    tflops, ...)."""
    key: str
    kernel: str
    config: dict
    shape: list
    stage: str
    status: str
    reason: str | None = None
    file: str | None = None
    line: int | None = None
    diagnosis: str | None = None
    metrics: dict = dataclasses.field(default_factory=dict)
    device: str | None = None
    env: dict = dataclasses.field(default_factory=dict)
    seconds: float = 0.0
    sweep: str | None = None
    source_hash: str | None = None
    config_id: str = ""
    created: float = 0.0

    def __post_init__(self):
        if self.stage not in STAGES:
            raise ValueError(f"stage {self.stage!r} is not one of {STAGES}")
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {STATUSES}")
        self.shape = list(self.shape)
        self.config_id = self.config_id or config_id(self.config)
        self.created = self.created or time.time()

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def row_key(source_hash: str, config: dict, shape, stage: str, versions: str, where: str) -> str:
    """The key of a row: what decides its result, hashed.

    >>> row_key("src", {"BM": 64}, (64, 64, 64), "static", "triton 3.8.0", "sm_90")[:8]
    '...'  # doctest: +SKIP
    """
    text = "\x1f".join([source_hash, config_json(config), json.dumps(list(shape)), stage, versions, where])
    return hashlib.sha256(text.encode()).hexdigest()


class Store:
    """An SQLite results file (``":memory:"`` for a throwaway one).

    ``put(row)`` writes (and commits) one row, replacing a row of the same key; ``get(key)``,
    ``rows(...)`` and ``len()`` read. Safe to share between threads of one process; other
    processes open the same path and read while this one writes (WAL mode)."""

    def __init__(self, path: "str | os.PathLike" = ":memory:", *, readonly: bool = False):
        self.path = os.fspath(path)
        self.readonly = readonly
        self._lock = threading.RLock()
        if readonly:
            uri = f"file:{os.path.abspath(self.path)}?mode=ro"
            self._db = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=30)
        else:
            if self.path != ":memory:":
                os.makedirs(os.path.dirname(os.path.abspath(self.path)) or ".", exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
            self._init()
        self._db.row_factory = sqlite3.Row
        self._ready = not readonly

    def _has_results(self) -> bool:
        """Whether the file holds the results table yet. A read-only reader can open the file in the
        moment between a writer creating it and committing the schema (a live plot started with its
        sweep): that store is empty, not broken. A file with other tables and no results table is
        not a results store, and says so."""
        if self._ready:
            return True
        names = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "results" in names:
            self._ready = True
        elif names:
            raise ValueError(f"{self.path} is an SQLite file but not a tlx_workbench results store "
                             f"(its tables: {', '.join(sorted(names))}); pass the path of a store "
                             "written by explore(..., store=...)")
        return self._ready

    def _init(self):
        with self._lock, self._db:
            if self.path != ":memory:":
                self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("""CREATE TABLE IF NOT EXISTS results (
                key TEXT PRIMARY KEY, sweep TEXT, kernel TEXT, source_hash TEXT, config_id TEXT,
                config TEXT, shape TEXT, stage TEXT, status TEXT, reason TEXT, file TEXT, line INTEGER,
                diagnosis TEXT, metrics TEXT, device TEXT, env TEXT, seconds REAL, created REAL)""")
            self._db.execute("CREATE INDEX IF NOT EXISTS results_by_config ON results (kernel, config_id, stage)")
            self._db.execute("""CREATE TABLE IF NOT EXISTS sweeps (
                id TEXT PRIMARY KEY, kernel TEXT, created REAL, finished REAL, info TEXT)""")
            self._db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)")
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))

    # -- writing ----------------------------------------------------------------------------
    def put(self, row: Row) -> None:
        """Write one row and commit it (a sweep killed after this call keeps the row)."""
        d = row.as_dict()
        vals = [json.dumps(d[c], default=str) if c in _JSON else d[c] for c in _COLUMNS]
        with self._lock, self._db:
            self._db.execute(f"INSERT OR REPLACE INTO results ({', '.join(_COLUMNS)}) "
                             f"VALUES ({', '.join('?' * len(_COLUMNS))})", vals)

    def begin_sweep(self, sweep: str, kernel: str, info: dict) -> None:
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO sweeps VALUES (?, ?, ?, NULL, ?)",
                             (sweep, kernel, time.time(), json.dumps(info, default=str)))

    def end_sweep(self, sweep: str) -> None:
        with self._lock, self._db:
            self._db.execute("UPDATE sweeps SET finished = ? WHERE id = ?", (time.time(), sweep))

    # -- reading ----------------------------------------------------------------------------
    def _read(self, empty, query):
        """``query(db)`` under the lock; ``empty`` while the file has no results table yet (``_has_results``)."""
        with self._lock:
            return query(self._db) if self._has_results() else empty

    def get(self, key: str) -> Row | None:
        r = self._read(None, lambda db: db.execute("SELECT * FROM results WHERE key = ?", (key,)).fetchone())
        return _row(r) if r is not None else None

    def has(self, keys: Iterable[str], *, except_status: Iterable[str] = ()) -> set[str]:
        """Which of ``keys`` the store holds (not counting rows whose status is in ``except_status``)."""
        keys = list(keys)
        skip = set(except_status)

        def query(db):
            found: set[str] = set()
            for i in range(0, len(keys), 500):
                part = keys[i:i + 500]
                q = f"SELECT key, status FROM results WHERE key IN ({', '.join('?' * len(part))})"
                found.update(r[0] for r in db.execute(q, part) if r[1] not in skip)
            return found
        return self._read(set(), query)

    def rows(self, *, kernel: str | None = None, stage: str | None = None, status: str | None = None,
             sweep: str | None = None, since: float | None = None) -> list[Row]:
        """Rows, oldest first, filtered by any of kernel / stage / status / sweep / created-after."""
        where, vals = [], []
        for col, v in (("kernel", kernel), ("stage", stage), ("status", status), ("sweep", sweep)):
            if v is not None:
                where.append(f"{col} = ?")
                vals.append(v)
        if since is not None:
            where.append("created > ?")
            vals.append(since)
        q = "SELECT * FROM results" + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY created, rowid"
        return self._read([], lambda db: [_row(r) for r in db.execute(q, vals)])

    def sweeps(self) -> list[dict]:
        return self._read([], lambda db: [dict(r) | {"info": json.loads(r["info"] or "{}")}
                                          for r in db.execute("SELECT * FROM sweeps ORDER BY created")])

    def __len__(self):
        return self._read(0, lambda db: db.execute("SELECT COUNT(*) FROM results").fetchone()[0])

    def close(self):
        with self._lock:
            self._db.close()

    def __repr__(self):
        return f"Store({self.path!r}, {len(self)} rows)"


def _row(r: sqlite3.Row) -> Row:
    d = {c: (json.loads(r[c]) if c in _JSON and r[c] is not None else r[c]) for c in _COLUMNS}
    return Row(**d)

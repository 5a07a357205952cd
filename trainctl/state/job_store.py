"""`JobStore`: trainctl's local state (SQLite at $TRAINCTL_HOME/state.db, default ~/.trainctl) and ALL its SQL.

- One connection per command: the CLI opens the store once, passes it to the use case and closes it.
- Nothing is created by reading: a command that only reads (a plan, `ls`, `watch` of an unknown job) on a
  machine with no database creates none. The file appears with the first write (a launch).
- A versioned schema (`PRAGMA user_version`); an older database is migrated in place when opened.
- Every job and every measurement is keyed by the AWS endpoint it belongs to ('' is AWS itself, otherwise
  AWS_ENDPOINT_URL, e.g. the local sandbox) and records the account that launched it. A command sees the
  jobs and measured throughput of its own endpoint only, so the sandbox's CPU figures never enter a plan
  for AWS, and `ls` against AWS never lists sandbox jobs.
"""
from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from trainctl.errors import TrainctlError
from trainctl.plans import Option
from trainctl.state.measurements import Measurement, MeasurementsTable  # noqa: F401 (re-exported)

SCHEMA_VERSION = 3
AWS_ITSELF = ""  # the endpoint key of AWS's own (default) endpoints

# Version 1 (trainctl before the store) had no user_version and no endpoint or account: its tables are
# recognised by name and rebuilt by `_migrate_v1`.
SCHEMA_V2 = """
CREATE TABLE jobs (
    endpoint TEXT,                 -- '' = AWS, NULL = recorded before trainctl kept the endpoint (v1)
    job_id TEXT NOT NULL,
    account TEXT NOT NULL DEFAULT '',
    platform TEXT NOT NULL,
    region TEXT,
    spec_path TEXT,
    spec_name TEXT,
    model TEXT,
    batch_size INTEGER,
    option_json TEXT,              -- Option.model_dump_json(), NULL when a v1 option no longer validates
    failover_from TEXT,            -- the attempt this one replaced (launch --failover)
    plan_json TEXT,                -- the plan the option was chosen from, for the record
    status TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    UNIQUE (endpoint, job_id)
);
CREATE TABLE events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    endpoint TEXT,
    job_id TEXT NOT NULL,
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    detail TEXT
);
CREATE INDEX events_by_job ON events (endpoint, job_id);
CREATE TABLE measured_throughput (
    endpoint TEXT,
    account TEXT NOT NULL DEFAULT '',
    model TEXT NOT NULL,
    batch_size INTEGER NOT NULL,
    instance_type TEXT NOT NULL,
    count INTEGER NOT NULL,
    samples_per_s REAL NOT NULL,
    job_id TEXT NOT NULL,
    measured_at REAL NOT NULL,
    UNIQUE (endpoint, account, job_id)
);
"""
# v3: every job's measurement is kept (v2 kept one per layout, and two jobs of one layout read from the account
# replaced each other at every plan); plans choose among them (state/measurements.py)


def home() -> Path:
    return Path(os.environ.get("TRAINCTL_HOME") or Path.home() / ".trainctl")


def current_endpoint() -> str:
    """The endpoint this process talks to, as the store keys it ('' for AWS itself)."""
    return (os.environ.get("AWS_ENDPOINT_URL") or AWS_ITSELF).strip().rstrip("/").lower()


@dataclass(frozen=True)
class JobRow:
    """A job as trainctl recorded it at launch (and updated since)."""

    job_id: str
    endpoint: str | None
    account: str
    platform: str
    region: str | None
    spec_path: str | None
    spec_name: str | None
    model: str | None
    batch_size: int | None
    option: Option | None
    failover_from: str | None
    status: str | None
    created_at: float
    updated_at: float


class JobStore(MeasurementsTable):
    """The state database of one command, for one endpoint. Use as a context manager, or call close()."""

    def __init__(self, path: Path | None = None, endpoint: str | None = None):
        self.path = path or home() / "state.db"
        self.endpoint = current_endpoint() if endpoint is None else endpoint
        self._conn: sqlite3.Connection | None = None

    # ------------------------------------------------------------------ connection and schema
    def __enter__(self) -> "JobStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _reader(self) -> sqlite3.Connection | None:
        """The connection for reads, or None when there is no database yet (reading creates nothing)."""
        if self._conn is None and not self.path.exists():
            return None
        return self._connection()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=10)
            conn.row_factory = sqlite3.Row
            try:
                _upgrade(conn)
            except sqlite3.OperationalError:  # locked, disk full: the file is fine, the moment is not
                conn.close()
                raise
            except sqlite3.DatabaseError as e:  # not a database, or a corrupt one
                conn.close()
                raise BrokenStore(self.path, e) from None
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    @property
    def schema_version(self) -> int | None:
        conn = self._reader()
        return None if conn is None else conn.execute("PRAGMA user_version").fetchone()[0]

    def try_write(self, write) -> str | None:
        """Run `write(self)`; the database's error in words, naming the file, instead of raising it (None when
        written). For a record that must not hide what AWS already did (a job submitted, resources removed)."""
        try:
            write(self)
        except BrokenStore as e:
            return str(e)
        except (sqlite3.Error, OSError) as e:
            return f"{type(e).__name__}: {e} ({self.path})"
        return None

    def try_lock_launch(self, spec_name: str):
        """Take this store's lock of the launches of `spec_name` without waiting: (a file to keep open until the
        launch has recorded its outcome, None) or (None, the holder's pid) when another launch holds it. The
        operating system drops the lock of a process that ends, however it ends."""
        import fcntl
        import hashlib

        folder = self.path.parent / "locks"
        folder.mkdir(parents=True, exist_ok=True)
        name = hashlib.sha256(f"{self.endpoint}\0{spec_name}".encode()).hexdigest()[:20]
        handle = open(folder / f"launch-{name}.lock", "a+")  # noqa: SIM115 - kept open while the lock is held
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip()
            handle.close()
            return None, holder
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        return handle, None

    # ------------------------------------------------------------------ jobs
    def record_job(self, *, job_id: str, account: str, platform: str, region: str | None, spec_path: str,
                   spec_name: str, model: str, batch_size: int, option: Option, plan_json: str | None,
                   status: str, failover_from: str | None = None, created_at: float | None = None,
                   keep_existing: bool = False) -> None:
        """`created_at`: when the job was launched, for a record read back from the account (default: now).
        `keep_existing`: a row already here stays as it is (a copy from the account never replaces this machine's)."""
        now = time.time()
        with self._connection() as conn:
            conn.execute(f"INSERT OR {'IGNORE' if keep_existing else 'REPLACE'} INTO jobs (endpoint, job_id, account, "
                         "platform, region, spec_path, "
                         "spec_name, model, batch_size, option_json, failover_from, plan_json, status, created_at, "
                         "updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                         (self.endpoint, job_id, account, platform, region, spec_path, spec_name, model, batch_size,
                          option.model_dump_json(), failover_from, plan_json, status, created_at or now, now))

    def job(self, job_id: str) -> JobRow | None:
        """The job of this endpoint with this id (or one recorded before endpoints were kept), or None."""
        conn = self._reader()
        if conn is None:
            return None
        row = conn.execute("SELECT * FROM jobs WHERE job_id=? AND (endpoint=? OR endpoint IS NULL) "
                           "ORDER BY endpoint IS NULL LIMIT 1", (job_id, self.endpoint)).fetchone()
        return _job(row) if row else None

    def jobs(self, limit: int) -> list[JobRow]:
        """The newest jobs of this endpoint (and those recorded before endpoints were kept)."""
        conn = self._reader()
        if conn is None:
            return []
        # a row whose created_at is not a number (a hand edit, another program's write) is skipped and counted
        # (`skipped_rows`), so that one bad row does not break `ls` and `cost` for every other job
        mine = "(endpoint=? OR endpoint IS NULL)"
        self.skipped_rows = conn.execute(f"SELECT count(*) FROM jobs WHERE {mine} AND typeof(created_at) NOT IN "
                                         "('integer', 'real')", (self.endpoint,)).fetchone()[0]
        rows = conn.execute(f"SELECT * FROM jobs WHERE {mine} AND typeof(created_at) IN ('integer', 'real') "
                            "ORDER BY created_at DESC LIMIT ?", (self.endpoint, limit))
        return [_job(r) for r in rows]

    skipped_rows = 0  # of the last `jobs()`

    def set_status(self, job_id: str, status: str) -> None:
        with self._connection() as conn:
            conn.execute("UPDATE jobs SET status=?, updated_at=? WHERE job_id=? AND (endpoint=? OR endpoint IS "
                         "NULL)", (status, time.time(), job_id, self.endpoint))

    # ------------------------------------------------------------------ events
    def add_event(self, job_id: str, kind: str, detail: str = "") -> None:
        with self._connection() as conn:
            conn.execute("INSERT INTO events (endpoint, job_id, at, kind, detail) VALUES (?,?,?,?,?)",
                         (self.endpoint, job_id, time.time(), kind, detail))

    def events(self, job_id: str, kind: str | None = None) -> list[tuple[str, str]]:
        """(kind, detail) of a job's events, oldest first; only `kind` when given."""
        conn = self._reader()
        if conn is None:
            return []
        rows = conn.execute("SELECT kind, detail FROM events WHERE job_id=? AND (endpoint=? OR endpoint IS NULL) "
                            "AND (? IS NULL OR kind=?) ORDER BY id", (job_id, self.endpoint, kind, kind))
        return [(r["kind"], r["detail"]) for r in rows]

    def jobs_with_event(self, kind: str) -> set[str]:
        """The ids of this endpoint's jobs that have an event of `kind`."""
        conn = self._reader()
        if conn is None:
            return set()
        rows = conn.execute("SELECT DISTINCT job_id FROM events WHERE kind=? AND (endpoint=? OR endpoint IS NULL)",
                            (kind, self.endpoint))
        return {r[0] for r in rows}

class BrokenStore(TrainctlError):
    """The state database cannot be read at all: named, with the way out."""

    def __init__(self, path: Path, error: Exception):
        super().__init__(f"{path} is not a readable trainctl database ({error}): move it aside (`mv {path} "
                         f"{path}.broken`) and trainctl starts a new one; `trainctl down JOB --platform "
                         "sagemaker|ec2` works without it")


def _job(row: sqlite3.Row) -> JobRow:
    try:
        option = Option.model_validate_json(row["option_json"]) if row["option_json"] else None
    except ValueError:  # one damaged row (a hand edit, a crash mid-write) must not hide the others
        option = None
    return JobRow(row["job_id"], row["endpoint"], row["account"], row["platform"], row["region"],
                     row["spec_path"], row["spec_name"], row["model"], row["batch_size"], option,
                     row["failover_from"], row["status"], row["created_at"], row["updated_at"])


# ---------------------------------------------------------------------- versions
def _upgrade(conn: sqlite3.Connection) -> None:
    if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
        return
    with conn:  # one transaction (DDL included): a migration that fails leaves the old database as it was
        conn.execute("BEGIN IMMEDIATE")  # and a second process opening it meanwhile waits, then finds it done
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            from trainctl.errors import TrainctlError

            raise TrainctlError(f"{_path(conn)} has schema version {version}, newer than this trainctl knows "
                                f"({SCHEMA_VERSION}): upgrade trainctl, or point TRAINCTL_HOME elsewhere")
        if version == SCHEMA_VERSION:
            return
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if version == 2:
            _migrate_v2(conn)
        elif "jobs" in tables:  # version 0 with tables: trainctl's first schema, which set no user_version
            _migrate_v1(conn)
        else:
            _create(conn)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _create(conn: sqlite3.Connection) -> None:
    # statement by statement: executescript() would COMMIT the open transaction first (no ';' in comments)
    for statement in SCHEMA_V2.split(";"):
        if statement.strip():
            conn.execute(statement)


def _path(conn: sqlite3.Connection) -> str:
    return conn.execute("PRAGMA database_list").fetchone()[2]


def _migrate_v1(conn: sqlite3.Connection) -> None:
    """v1 -> v2: rename the old tables, create the new ones, copy every row. v1 kept no endpoint (NULL: origin
    unknown), no account, and a launch's `failover_from` inside the option JSON."""
    for table in ("jobs", "events", "measured_throughput"):
        conn.execute(f"ALTER TABLE {table} RENAME TO v1_{table}")
    _create(conn)
    for row in conn.execute("SELECT * FROM v1_jobs").fetchall():
        option_json, failover_from = _v1_option(row["option_json"])
        conn.execute("INSERT INTO jobs (endpoint, job_id, account, platform, region, spec_path, spec_name, model, "
                     "batch_size, option_json, failover_from, plan_json, status, created_at, updated_at) "
                     "VALUES (NULL,?,'',?,?,?,?,?,?,?,?,?,?,?,?)",
                     (row["job_id"], row["platform"], row["region"], row["spec_path"], row["spec_name"],
                      row["model"], row["batch_size"], option_json, failover_from, row["plan_json"], row["status"],
                      row["created_at"], row["updated_at"]))
    conn.execute("INSERT INTO events (endpoint, job_id, at, kind, detail) "
                 "SELECT NULL, job_id, at, kind, detail FROM v1_events ORDER BY id")
    conn.execute("INSERT INTO measured_throughput (endpoint, account, model, batch_size, instance_type, count, "
                 "samples_per_s, job_id, measured_at) SELECT NULL, '', model, batch_size, instance_type, count, "
                 "samples_per_s, job_id, measured_at FROM v1_measured_throughput")
    for table in ("jobs", "events", "measured_throughput"):
        conn.execute(f"DROP TABLE v1_{table}")


def _migrate_v2(conn: sqlite3.Connection) -> None:
    """v2 -> v3: the measurements table keyed by job instead of by layout (the rows themselves are kept)."""
    conn.execute("ALTER TABLE measured_throughput RENAME TO v2_measured_throughput")
    table = next(s for s in SCHEMA_V2.split(";") if "CREATE TABLE measured_throughput" in s)
    conn.execute(table)
    conn.execute("INSERT OR IGNORE INTO measured_throughput SELECT * FROM v2_measured_throughput")
    conn.execute("DROP TABLE v2_measured_throughput")


def _v1_option(text: str | None) -> tuple[str | None, str | None]:
    """(the option as the model writes it, or None when it no longer validates; failover_from)."""
    from pydantic import ValidationError

    try:
        doc = json.loads(text or "null")
    except ValueError:
        return None, None
    if not isinstance(doc, dict):
        return None, None
    failover_from = doc.pop("failover_from", None)
    try:
        option = Option.model_validate({k: v for k, v in doc.items() if k in Option.model_fields})
    except ValidationError:
        return None, failover_from
    return option.model_dump_json(), failover_from

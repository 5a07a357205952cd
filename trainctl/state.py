"""Local state in SQLite at $TRAINCTL_HOME/state.db (default ~/.trainctl): jobs, events, measured throughput."""
from __future__ import annotations

import json
import os
import sqlite3
import time
from contextlib import closing
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY,
    platform TEXT NOT NULL,
    region TEXT,
    spec_path TEXT,
    spec_name TEXT,
    model TEXT,
    batch_size INTEGER,
    option_json TEXT NOT NULL,
    plan_json TEXT,
    expected_cost_usd REAL,
    status TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    detail TEXT
);
CREATE TABLE IF NOT EXISTS measured_throughput (
    model TEXT NOT NULL,
    batch_size INTEGER NOT NULL,
    instance_type TEXT NOT NULL,
    count INTEGER NOT NULL,
    samples_per_s REAL NOT NULL,
    job_id TEXT NOT NULL,
    measured_at REAL NOT NULL,
    PRIMARY KEY (model, batch_size, instance_type, count)
);
"""


def home() -> Path:
    return Path(os.environ.get("TRAINCTL_HOME") or Path.home() / ".trainctl")


def connect() -> sqlite3.Connection:
    h = home()
    h.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(h / "state.db", timeout=10)
    conn.row_factory = sqlite3.Row
    conn.executescript(SCHEMA)
    return conn


def record_measured(model: str, batch_size: int, instance_type: str, count: int, samples_per_s: float,
                    job_id: str) -> None:
    with closing(connect()) as conn, conn:
        conn.execute("INSERT OR REPLACE INTO measured_throughput VALUES (?,?,?,?,?,?,?)",
                     (model, batch_size, instance_type, count, samples_per_s, job_id, time.time()))


def measured_rates(model: str, batch_size: int):
    """(model, batch, instance type) -> MeasuredRate, the newest measurement per instance type."""
    from trainctl.planner import MeasuredRate

    path = home() / "state.db"
    if not path.exists():  # planning must not create state
        return {}
    with closing(connect()) as conn:
        rows = conn.execute("SELECT * FROM measured_throughput WHERE model=? AND batch_size=? ORDER BY measured_at",
                            (model, batch_size)).fetchall()
    return {(r["model"], r["batch_size"], r["instance_type"]): MeasuredRate(r["samples_per_s"], r["count"],
                                                                            r["job_id"]) for r in rows}


def record_job(job_id: str, platform: str, region: str | None, spec_path: str, spec_name: str, model: str,
               batch_size: int, option: dict, plan: dict | None, status: str) -> None:
    now = time.time()
    with closing(connect()) as conn, conn:
        conn.execute("INSERT OR REPLACE INTO jobs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                     (job_id, platform, region, spec_path, spec_name, model, batch_size, json.dumps(option),
                      json.dumps(plan) if plan is not None else None, option.get("expected_cost_usd"), status,
                      now, now))


def add_event(job_id: str, kind: str, detail: str = "") -> None:
    with closing(connect()) as conn, conn:
        conn.execute("INSERT INTO events (job_id, at, kind, detail) VALUES (?,?,?,?)", (job_id, time.time(), kind,
                                                                                        detail))

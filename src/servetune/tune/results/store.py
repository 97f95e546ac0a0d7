"""The experiment folder's SQLite store: every run lands here the moment it finishes, so a crash or Ctrl-C
loses at most the run in flight, and `--resume` knows exactly what is left to do.

A running experiment holds the folder's lock (`servetune.lock`, an advisory lock the kernel drops when the process
dies), so a second `tune --out` of the same folder is refused with who holds it instead of launching the same
engines twice; `servetune report` opens the store read-only. Secrets are redacted before anything is stored.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import IO, Any

from servetune.errors import ServetuneError
from servetune.fileio import lock_folder
from servetune.secrets import Redactor
from servetune.tune.results.result import Failure, LostAttempt, RunResult, VariantRecord, VariantStatus
from servetune.tune.schema.variants import Variant

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS variants (
  key TEXT PRIMARY KEY, position INTEGER NOT NULL, variant TEXT NOT NULL, status TEXT NOT NULL,
  failure TEXT, skip_reasons TEXT, launch_s REAL, wall_s REAL, gpu_minutes REAL NOT NULL DEFAULT 0,
  facts TEXT, estimated INTEGER NOT NULL DEFAULT 0, updated REAL NOT NULL, ran_on TEXT);
CREATE TABLE IF NOT EXISTS runs (
  variant_key TEXT NOT NULL, probe TEXT NOT NULL, repeat INTEGER NOT NULL, result TEXT NOT NULL,
  wall_s REAL NOT NULL, finished REAL NOT NULL, time_scale REAL NOT NULL DEFAULT 1,
  PRIMARY KEY (variant_key, probe, repeat));
CREATE TABLE IF NOT EXISTS lost (
  variant_key TEXT NOT NULL, ran_on TEXT NOT NULL, failure TEXT NOT NULL, at REAL NOT NULL);
"""

FINISHED: tuple[VariantStatus, ...] = ("done", "failed", "skipped")
STORE_NAME = "servetune.db"
"""The store's file name inside an experiment folder."""
LOCK_NAME = "servetune.lock"
_TABLES = {"meta", "variants", "runs"}


class Store:
    """One SQLite file per experiment folder; each write is its own committed transaction.

    `readonly` opens an existing store for reading only (reports); `lock` takes the folder's lock for a run."""

    def __init__(self, path: Path, *, readonly: bool = False, redactor: Redactor | None = None) -> None:
        self.path = path
        self.redactor = redactor or Redactor()
        self._lock: IO[str] | None = None
        try:
            if readonly:
                # In a folder nothing can write in, SQLite cannot make the WAL index beside the file; no writer can
                # be there either, so the file is read as it stands.
                fixed = "" if os.access(path.parent, os.W_OK) else "&immutable=1"
                self._db = sqlite3.connect(f"file:{path}?mode=ro{fixed}", uri=True, isolation_level=None, timeout=30)
                tables = {row[0] for row in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
                if not tables >= _TABLES:
                    raise ServetuneError(
                        f"{path} is an SQLite file but not a servetune store",
                        "give the --out folder of `servetune tune`",
                    )
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._db = sqlite3.connect(path, isolation_level=None, timeout=30)
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.executescript(_SCHEMA)
                columns = {row[1] for row in self._db.execute("PRAGMA table_info(runs)")}
                if "time_scale" not in columns:  # a folder from before runs recorded the simulator's time scale
                    self._db.execute("ALTER TABLE runs ADD COLUMN time_scale REAL NOT NULL DEFAULT 1")
                columns = {row[1] for row in self._db.execute("PRAGMA table_info(variants)")}
                if "ran_on" not in columns:  # a folder from before launches recorded where they ran
                    self._db.execute("ALTER TABLE variants ADD COLUMN ran_on TEXT")
        except sqlite3.DatabaseError as err:
            raise ServetuneError(
                f"{path} cannot be read as a servetune store ({err})",
                "the file is corrupt or another program's: give the --out folder of `servetune tune`, or move the file",
            ) from None

    def lock(self) -> None:
        """Takes the folder's lock for this process (refused, with the holder, when another run has it)."""
        folder = self.path.parent
        self._lock = lock_folder(
            folder,
            LOCK_NAME,
            lambda holder: ServetuneError(
                f"{folder} is in use by {holder}",
                "wait for that run to finish (or stop it), or give another --out folder",
            ),
        )

    def close(self) -> None:
        self._db.close()
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    # meta ---------------------------------------------------------------------------------------
    def set_meta(self, key: str, value: Any) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(self.redactor.data(value))))

    def meta(self, key: str, default: Any = None) -> Any:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def check_experiment(self, fingerprint: str, resume: bool) -> None:
        """Refuses to mix two different experiments (or a fresh run into an old folder) in one store."""
        stored = self.meta("experiment_fingerprint")
        if stored is None:
            self.set_meta("experiment_fingerprint", fingerprint)
            return
        if not resume:
            raise ServetuneError(
                f"{self.path.parent} already holds results of an experiment",
                "add --resume to continue it, or give another --out folder",
            )
        if stored != fingerprint:
            raise ServetuneError(
                f"{self.path.parent} holds results of a different experiment (the file changed since)",
                "resume with the same experiment file, or give another --out folder",
            )

    # variants -----------------------------------------------------------------------------------
    def add_variant(self, variant: Variant, position: int) -> None:
        """Registers a variant as pending (no-op when it is already known, e.g. on resume)."""
        self._db.execute(
            "INSERT OR IGNORE INTO variants (key, position, variant, status, updated) VALUES (?, ?, ?, 'pending', ?)",
            (variant.key(), position, json.dumps(self.redactor.data(variant.model_dump(mode="json"))), time.time()),
        )

    def set_status(
        self,
        key: str,
        status: VariantStatus,
        *,
        failure: Failure | None = None,
        skip_reasons: list[str] | None = None,
        launch_s: float | None = None,
        wall_s: float | None = None,
        gpu_minutes: float | None = None,
        facts: dict[str, Any] | None = None,
        estimated: bool | None = None,
        ran_on: str | None = None,
    ) -> None:
        fields: dict[str, Any] = {"status": status, "updated": time.time()}
        if failure is not None:
            fields["failure"] = json.dumps(self.redactor.data(failure.model_dump(mode="json")))
        if skip_reasons is not None:
            fields["skip_reasons"] = json.dumps(skip_reasons)
        for name, value in (("launch_s", launch_s), ("wall_s", wall_s), ("gpu_minutes", gpu_minutes)):
            if value is not None:
                fields[name] = value
        if facts is not None:
            fields["facts"] = json.dumps(facts, default=str)
        if estimated is not None:
            fields["estimated"] = int(estimated)
        if ran_on is not None:
            fields["ran_on"] = ran_on
        assignments = ", ".join(f"{name} = ?" for name in fields)
        self._db.execute(f"UPDATE variants SET {assignments} WHERE key = ?", (*fields.values(), key))

    def reset_failed(self) -> list[str]:
        """Marks every failed variant pending again (its finished probe runs stay); their names."""
        rows = self._db.execute("SELECT key, variant FROM variants WHERE status = 'failed'").fetchall()
        self._db.execute("UPDATE variants SET status = 'pending', failure = NULL WHERE status = 'failed'")
        return [json.loads(variant)["name"] for _, variant in rows]

    def add_lost(self, key: str, lost: LostAttempt) -> None:
        """Keeps a lost launch of a variant (its node or task died) beside the variant's later outcome."""
        failure = json.dumps(self.redactor.data(lost.failure.model_dump(mode="json")))
        self._db.execute("INSERT INTO lost VALUES (?, ?, ?, ?)", (key, lost.ran_on, failure, time.time()))

    def status(self, key: str) -> VariantStatus | None:
        row = self._db.execute("SELECT status FROM variants WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    # runs ---------------------------------------------------------------------------------------
    def add_run(self, run: RunResult) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO runs (variant_key, probe, repeat, result, wall_s, finished, time_scale)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                run.variant_key,
                run.probe,
                run.repeat,
                json.dumps(self.redactor.data(run.result.model_dump(mode="json"))),
                run.wall_s,
                time.time(),
                run.time_scale,
            ),
        )

    def finished_runs(self, key: str) -> set[tuple[str, int]]:
        rows = self._db.execute("SELECT probe, repeat FROM runs WHERE variant_key = ?", (key,))
        return {(probe, repeat) for probe, repeat in rows}

    def runs(self, key: str) -> list[RunResult]:
        from servetune.suite.result import ProbeResult

        rows = self._db.execute(
            "SELECT probe, repeat, result, wall_s, time_scale FROM runs WHERE variant_key = ? ORDER BY finished",
            (key,),
        )
        return [
            RunResult(
                variant_key=key, probe=p, repeat=r, result=ProbeResult.model_validate_json(res), wall_s=w, time_scale=ts
            )
            for p, r, res, w, ts in rows
        ]

    # read back ----------------------------------------------------------------------------------
    def records(self) -> list[VariantRecord]:
        """Every variant with its runs, in run order."""
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(variants)")}
        ran_on_column = "ran_on" if "ran_on" in columns else "NULL"  # a read-only store from before ran_on
        rows = self._db.execute(
            "SELECT key, position, variant, status, failure, skip_reasons, launch_s, wall_s, gpu_minutes, facts,"
            f" estimated, {ran_on_column} FROM variants ORDER BY position"
        ).fetchall()
        lost = self._lost()
        out = []
        for key, position, variant, status, failure, skips, launch_s, wall_s, gpu_min, facts, estimated, ran_on in rows:
            out.append(
                VariantRecord(
                    variant=Variant.model_validate_json(variant),
                    position=position,
                    status=status,
                    failure=Failure.model_validate_json(failure) if failure else None,
                    skip_reasons=json.loads(skips) if skips else [],
                    launch_s=launch_s,
                    wall_s=wall_s,
                    gpu_minutes=gpu_min or 0.0,
                    facts=json.loads(facts) if facts else {},
                    estimated=bool(estimated),
                    ran_on=ran_on,
                    lost=lost.get(key, []),
                    runs=self.runs(key),
                )
            )
        return out

    def _lost(self) -> dict[str, list[LostAttempt]]:
        tables = {row[0] for row in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "lost" not in tables:  # a read-only store from before lost launches were kept
            return {}
        out: dict[str, list[LostAttempt]] = {}
        for key, ran_on, failure in self._db.execute("SELECT variant_key, ran_on, failure FROM lost ORDER BY at"):
            out.setdefault(key, []).append(LostAttempt(ran_on=ran_on, failure=Failure.model_validate_json(failure)))
        return out

    def record(self, key: str) -> VariantRecord:
        """One variant's record (it must have been added)."""
        found = next((r for r in self.records() if r.key == key), None)
        if found is None:
            raise KeyError(key)
        return found

    def next_position(self) -> int:
        row = self._db.execute("SELECT COALESCE(MAX(position), -1) + 1 FROM variants").fetchone()
        return int(row[0])

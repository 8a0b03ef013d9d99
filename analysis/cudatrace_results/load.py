"""Reading a results folder (results/<run-id>/) as the harness wrote it."""
import json
import os

# What this package knows how to read, by file name, oldest first. The harness writes
# `schema_version` (schema/summary.v1.schema.json, schema/bench_summary.v<N>.schema.json);
# files written before that field existed carry only the record version `v`, which was 1
# for both, and have the same shape: they read as version 1. bench_summary.json version 2
# adds to version 1 (call kinds, skipped calls, estimators, uprobe split, agreement).
SUPPORTED_VERSIONS = {"summary.json": (1,), "bench_summary.json": (1, 2)}


class SchemaError(ValueError):
    """A result file this package cannot read: unknown version, or not a JSON object."""


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def schema_version(data):
    if "schema_version" in data:
        return data["schema_version"]
    return data.get("v")


def load_result(path):
    """One result file, its version checked where it is one of ours."""
    data = load_json(path)
    name = os.path.basename(path)
    if not isinstance(data, dict):
        raise SchemaError(f"{path}: not a JSON object")
    known = SUPPORTED_VERSIONS.get(name)
    if known is not None:
        version = schema_version(data)
        if version not in known:
            raise SchemaError(
                f"{path}: schema_version {version!r} is not one this analysis reads "
                f"({', '.join(map(str, known))}): it was written by another harness version; "
                f"use that version's analysis (share/cudatrace/report/ beside that harness)")
    return data


class Run:
    """One results/<run-id>/ folder: its manifest, and a matrix or command run's summary
    and/or a benchmark's summary (None where absent)."""

    def __init__(self, folder, manifest, summary, bench):
        self.folder, self.manifest, self.summary, self.bench = folder, manifest, summary, bench

    @property
    def run_id(self):
        return (self.summary or self.bench or {}).get("run_id", "")

    @property
    def combos(self):
        return (self.summary or {}).get("combos", [])

    @property
    def verdict(self):
        return (self.summary or {}).get("verdict")

    def bench_rows(self):
        """The benchmark's rows, each with the run it came from."""
        return [dict(r, run=self.run_id) for r in (self.bench or {}).get("rows", [])]


def _optional(folder, name):
    path = os.path.join(folder, name)
    return load_result(path) if os.path.exists(path) else None


def load_run(folder):
    summary, bench = _optional(folder, "summary.json"), _optional(folder, "bench_summary.json")
    if summary is None and bench is None:
        raise SchemaError(f"{folder} holds neither summary.json nor bench_summary.json (not a results/<run-id> folder)")
    return Run(folder, _optional(folder, "manifest.json"), summary, bench)


def load_runs(folders):
    return [load_run(f) for f in folders]

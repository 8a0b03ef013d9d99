"""bench/percall run by hand (ci/gpu-check.sh cupti-split): one Google Benchmark JSON per
process, named LABEL.rROUND.json."""
import json
import pathlib
from collections import defaultdict


def load_percall_folder(folder, warn=None):
    """-> (labels in first-seen order, medians, ab, control): each a dict (call, label) ->
    per-round values. An unreadable file is skipped and passed to warn(name, error)."""
    medians, ab, control, labels = defaultdict(list), defaultdict(list), defaultdict(list), []
    for path in sorted(pathlib.Path(folder).glob("*.r*.json")):
        label = path.name.rsplit(".r", 1)[0]
        if label not in labels:
            labels.append(label)
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            if warn:
                warn(path.name, e)
            continue
        for b in data.get("benchmarks", []):
            if b.get("run_type") != "iteration":
                continue
            call = b["name"].split("/")[0]
            medians[call, label].append(b.get("median_ns", b.get("real_time", 0.0)))
            if "ab_delta_ns" in b:
                ab[call, label].append(b["ab_delta_ns"])
                control[call, label].append(b.get("control_delta_ns", 0.0))
    return labels, medians, ab, control

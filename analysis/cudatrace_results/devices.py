"""Coverage per process and GPU, as the harness wrote it: the buckets of each scored layer
(workloads: summary.json combos[].layers[].per_device) and a command's verdict per process
and device (summary.json verdict.per_device). The harness decides what fell short
(combos[].per_device_short, verdict.per_device rows' status); this only reads it, finds the
bucket each of its lines names, and names the GPUs the way the host does."""

NO_DEVICE = "no device"
UNATTRIBUTED = "device not attributable by this method"
ALL_DEVICES = "all its devices"  # a command's process as a whole, whatever GPU its records name


def gpu_names(manifests):
    """PCI bus id -> "GPU 1 (NVIDIA H100 80GB HBM3)", from the manifests' device lists (the
    harness's own numbering); ids no manifest lists are shown as they are."""
    names = {}
    for m in manifests or []:
        for d in (((m or {}).get("environment") or {}).get("gpu") or {}).get("devices") or []:
            bus = d.get("pci_bus_id")
            if bus:
                names[bus] = f'GPU {d.get("index")} ({d.get("name", "")})'.replace(" ()", "")
    return names


def gpu_indexes(manifests):
    """PCI bus id -> the harness's ordinal of that GPU, for a short label ("gpu1")."""
    out = {}
    for m in manifests or []:
        for d in (((m or {}).get("environment") or {}).get("gpu") or {}).get("devices") or []:
            if d.get("pci_bus_id"):
                out[d["pci_bus_id"]] = d.get("index")
    return out


def short_device_label(device, indexes):
    if device == UNATTRIBUTED:
        return "(no device: not attributable)"
    if device == ALL_DEVICES:
        return "(all GPUs)"
    return f"gpu{indexes[device]}" if device in indexes else device


def device_label(device, names):
    if device in (NO_DEVICE, UNATTRIBUTED, ALL_DEVICES):
        return device
    return f"{names[device]} {device}" if device in names else device


def _several(buckets):
    """More than one process or device holds something: a breakdown worth showing. A choice
    of what to lay out only: whether a bucket fell short is the harness's (per_device_short)."""
    processes, devices = set(), set()
    for b in buckets:
        if b.get("expected", 0) == 0 and b.get("phantom", 0) == 0:
            continue
        processes.add(b.get("process"))
        if b.get("device") != NO_DEVICE:
            devices.add(b.get("device"))
    return len(processes) > 1 or len(devices) > 1


def where(process, device):
    """harness/score/per_device.cpp where(): how a shortfall line names its bucket."""
    if device == UNATTRIBUTED:
        return f"{process} ({UNATTRIBUTED})"
    if device == NO_DEVICE:
        return f"{process} (calls of no device)"
    return device if not process else f"{process} on {device}"


def _named_short(combo, layer, bucket):
    """Whether the harness named this bucket in the combination's per_device_short
    ("runtime: rank 1 on 0000:1a:00.0: 0 of 18 (0.0%)")."""
    head = (f'{layer}: {where(bucket.get("process", ""), bucket.get("device", ""))}: '
            f'{bucket.get("matched", 0)} of {bucket.get("expected", 0)} (')
    return any(line.startswith(head) for line in combo.get("per_device_short") or [])


def workload_rows(combos):
    """One row per workload x linkage x method x layer x (process, device), for the layers
    whose runs had more than one process or GPU; `short` where the harness named the
    (process, device) as short of its share (per_device_short), and nowhere else."""
    rows = []
    for c in combos:
        if not c.get("workload"):
            continue
        for layer in c.get("layers", []):
            buckets = layer.get("per_device") or []
            if not _several(buckets):
                continue
            for b in buckets:
                expected, matched = b.get("expected", 0), b.get("matched", 0)
                rows.append({"workload": c["workload"], "linkage": c.get("linkage"), "method": c["method"],
                             "layer": layer["layer"], "process": b.get("process", ""), "device": b.get("device", ""),
                             "expected": expected, "matched": matched, "phantom": b.get("phantom", 0),
                             "recall": matched / expected if expected else None,
                             "short": _named_short(c, layer["layer"], b)})
    return rows


def attribution_rows(combos):
    """Per workload, method and layer: whether its records name their device, and where the
    ledger's and the method's both do, how many agree."""
    rows = []
    for c in combos:
        if not c.get("workload"):
            continue
        for layer, a in sorted((c.get("device_attribution") or {}).items()):
            rows.append({"workload": c["workload"], "linkage": c.get("linkage"), "method": c["method"], "layer": layer,
                         "named": bool(a.get("named")), "how": a.get("how", ""), "compared": a.get("compared", 0),
                         "equal": a.get("equal", 0), "unnamed": a.get("unnamed", 0)})
    return rows


def command_rows(summary):
    """A command's verdict per process and device: one row per method, layer, process and
    device, with the reference's count and what the method matched of it; `short` where the
    harness's status for the row (harness/score/per_device.cpp) is partial or blind."""
    v = ((summary or {}).get("verdict") or {}).get("per_device") or {}
    return [dict(r, short=r.get("status") in ("partial", "blind")) for r in v.get("rows") or []]


def command_reference(summary):
    """(reference method or None, why there is none, its processes)."""
    v = ((summary or {}).get("verdict") or {}).get("per_device") or {}
    return v.get("reference"), v.get("why", ""), v.get("processes") or []

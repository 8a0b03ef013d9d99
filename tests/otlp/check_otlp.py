#!/usr/bin/env python3
"""Checks the harness's OpenTelemetry output with OpenTelemetry's own definitions.

Every line the harness writes (or sends) is decoded as an OTLP TracesData by protobuf's
JSON parser on the opentelemetry-proto files (otlp_definitions.sh), strictly: a field the
definitions do not have is an error. The OTLP JSON encoding differs from protobuf's in one
place, which the specification names: trace and span ids are hex, not base64; they are
checked as hex and converted before parsing. Then every span is checked against the run's
events.jsonl: count, names, start and end times, error status, links.

  check_otlp.py DEFS HARNESS WORK export     runs of the errors workload, exported and checked
  check_otlp.py DEFS HARNESS WORK links      a run folder with correlated launches and kernels
  check_otlp.py DEFS HARNESS WORK endpoint   --otlp-endpoint against a receiver started here
  check_otlp.py DEFS HARNESS WORK gpu        vecadd under cupti on a GPU: kernels linked
  check_otlp.py DEFS HARNESS RESULTS existing   a results folder made elsewhere (a command run)
"""
import base64
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from collections import Counter, defaultdict

SKIP = 77
HEX = {"traceId": 32, "spanId": 16, "parentSpanId": 16}


def load_definitions(defs):
    sys.path.insert(0, os.path.join(defs, "python"))
    from google.protobuf import json_format  # noqa: E402
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2  # noqa: E402
    from opentelemetry.proto.trace.v1 import trace_pb2  # noqa: E402
    return json_format, trace_pb2, trace_service_pb2


class Otlp:
    def __init__(self, defs):
        self.json_format, self.trace_pb2, self.service_pb2 = load_definitions(defs)

    def ids_to_base64(self, node, where):
        """OTLP JSON ids are lowercase hex of a fixed length; protobuf's parser wants base64."""
        if isinstance(node, dict):
            for key, value in list(node.items()):
                if key in HEX and isinstance(value, str):
                    if not re.fullmatch("[0-9a-f]{%d}" % HEX[key], value) or set(value) == {"0"}:
                        raise ValueError(f"{where}: {key} {value!r} is not {HEX[key]} hex digits, nonzero")
                    node[key] = base64.b64encode(bytes.fromhex(value)).decode()
                else:
                    self.ids_to_base64(value, where)
        elif isinstance(node, list):
            for value in node:
                self.ids_to_base64(value, where)

    def decode(self, text, where, message="TracesData"):
        obj = json.loads(text)
        self.ids_to_base64(obj, where)
        cls = getattr(self.trace_pb2, message, None) or getattr(self.service_pb2, message)
        msg = cls()
        self.json_format.Parse(json.dumps(obj), msg, ignore_unknown_fields=False)
        return msg


def attrs(kvs):
    """KeyValue list -> dict of Python values."""
    def value(v):
        kind = v.WhichOneof("value")
        if kind is None:
            return None
        if kind == "array_value":
            return [value(x) for x in v.array_value.values]
        if kind == "kvlist_value":
            return {x.key: value(x.value) for x in v.kvlist_value.values}
        return getattr(v, kind)
    return {kv.key: value(kv.value) for kv in kvs}


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def run_folders(results):
    runs = os.path.join(results, "runs")
    return sorted(os.path.join(runs, d) for d in os.listdir(runs) if os.path.exists(os.path.join(runs, d, "run.json")))


def failed(layer, ret):
    if ret is None:
        return False
    return ret != 0 if layer in ("runtime", "driver") else (layer == "syscall" and ret < 0)


class Checker:
    def __init__(self):
        self.problems = []

    def expect(self, ok, what):
        if not ok:
            self.problems.append(what)
        return ok

    def finish(self, summary):
        for p in self.problems[:40]:
            print("FAIL:", p)
        if self.problems:
            print(f"{len(self.problems)} problem(s)")
            sys.exit(1)
        print("ok:", summary)


def spans_by_run(otlp, lines, where):
    """run key -> list of (resource attributes, scope name, span)."""
    out = defaultdict(list)
    for n, line in enumerate(lines, 1):
        data = otlp.decode(line, f"{where}:{n}")
        for rs in data.resource_spans:
            ra = attrs(rs.resource.attributes)
            out[ra["cudatrace.run"]].append((ra, None, None))
            for ss in rs.scope_spans:
                for span in ss.spans:
                    out[ra["cudatrace.run"]].append((ra, ss.scope.name, span))
    return out


def run_events(binary, folder):
    """A run folder's events: the store (events.msgpack.zst) through `harness --export-jsonl`,
    or an events.jsonl written by hand."""
    if os.path.exists(os.path.join(folder, "events.msgpack.zst")):
        p = subprocess.run([binary, "--export-jsonl", folder, "-o", "-"], capture_output=True, text=True, check=True)
        return [json.loads(line) for line in p.stdout.splitlines() if line]
    path = os.path.join(folder, "events.jsonl")
    return read_jsonl(path) if os.path.exists(path) else []


def check_run(c, folder, run_id, entries, binary):
    """One run folder's spans against its events.jsonl and run.json."""
    key = f"{run_id}/{os.path.basename(folder)}"
    run = json.load(open(os.path.join(folder, "run.json")))
    events = [e for e in run_events(binary, folder) if e["layer"] != "meta"]
    offset = run["clock"]["realtime_minus_monotonic_ns"]
    c.expect(entries, f"{key}: no resource exported")
    if not entries:
        return 0, 0
    for ra, _, _ in entries:
        c.expect(ra.get("service.name") == "cudatrace", f"{key}: service.name {ra.get('service.name')}")
        c.expect(ra.get("cudatrace.method") == run["method"], f"{key}: method {ra.get('cudatrace.method')}")
        for name, n in run["tracer"]["loss"].items():
            if isinstance(n, int):
                c.expect(ra.get("cudatrace.loss." + name) == n, f"{key}: loss {name} {ra.get('cudatrace.loss.' + name)} != {n}")
        not_observed = [f"{u['layer']}: {u['reason']}" for u in run["unobserved"]]
        c.expect(ra.get("cudatrace.layers_not_observed", []) == not_observed, f"{key}: layers_not_observed")
    spans = [(ra, scope, s) for ra, scope, s in entries if s is not None]
    c.expect(len(spans) == len(events), f"{key}: {len(spans)} spans for {len(events)} events")
    want = Counter((e["name"], e["ts"] + offset, e["ts"] + e.get("dur", 0) + offset, e["pid"]) for e in events)
    got = Counter((s.name, s.start_time_unix_nano, s.end_time_unix_nano, ra["process.pid"]) for ra, _, s in spans)
    c.expect(want == got, f"{key}: spans differ from events: missing {list((want - got).elements())[:3]}, "
             f"extra {list((got - want).elements())[:3]}")
    error_events = sum(failed(e["layer"], e.get("ret")) for e in events)
    errors = 0
    for ra, scope, s in spans:
        a = attrs(s.attributes)
        layer, ret = a["cudatrace.layer"], a.get("cuda.return_code")
        gpu = layer in ("gpu-activity", "device")
        c.expect(scope == "cudatrace/" + run["method"] + ("/gpu" if gpu else ""), f"{key}: {s.name} in scope {scope}")
        if failed(layer, ret):
            errors += 1
            ok = s.status.code == s.status.STATUS_CODE_ERROR and s.status.message
            if layer == "runtime":
                ok = ok and s.status.message.startswith("cuda")
            elif layer == "driver":
                ok = ok and s.status.message.startswith("CU")
            c.expect(ok, f"{key}: {s.name} returned {ret}: status {s.status.code} {s.status.message!r}")
        else:
            c.expect(s.status.code == s.status.STATUS_CODE_UNSET, f"{key}: {s.name} ok but status {s.status.code}")
        c.expect(len(s.trace_id) == 16 and len(s.span_id) == 8, f"{key}: id sizes")
    c.expect(errors == error_events, f"{key}: {errors} ERROR spans for {error_events} failed calls")
    return len(spans), errors


def check_links(c, key, entries):
    """Each GPU span with a correlation id links to every call of its process with that id."""
    by_id = {}
    calls_of = defaultdict(list)
    for ra, _, s in entries:
        if s is None:
            continue
        a = attrs(s.attributes)
        by_id[(s.trace_id, s.span_id)] = (s, a)
        if a["cudatrace.layer"] not in ("gpu-activity", "device") and "cudatrace.correlation_id" in a:
            calls_of[(ra["process.pid"], a["cudatrace.correlation_id"])].append(s.span_id)
    linked = 0
    for ra, _, s in entries:
        if s is None:
            continue
        a = attrs(s.attributes)
        if a["cudatrace.layer"] != "gpu-activity" or "cudatrace.correlation_id" not in a:
            continue
        want = sorted(calls_of.get((ra["process.pid"], a["cudatrace.correlation_id"]), []))
        got = sorted(link.span_id for link in s.links)
        c.expect(want == got, f"{key}: kernel {s.name} corr {a['cudatrace.correlation_id']}: links {len(got)}, calls {len(want)}")
        for link in s.links:
            target = by_id.get((link.trace_id, link.span_id))
            c.expect(target is not None, f"{key}: {s.name} links to a span not exported")
            if target:
                c.expect(target[1].get("cudatrace.correlation_id") == a["cudatrace.correlation_id"],
                         f"{key}: {s.name} linked to {target[0].name} of another correlation id")
        linked += bool(s.links)
    return linked


def harness(binary, *args, check=True, **kw):
    p = subprocess.run([binary, *args], capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        sys.exit(f"harness {' '.join(args)} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    return p


def results_of(out):
    return os.path.join(out, sorted(os.listdir(out))[-1])


def export_and_check(c, otlp, binary, results, out_file):
    if os.path.exists(out_file):
        os.remove(out_file)
    harness(binary, "--export-otlp", results, "-o", out_file)
    lines = open(out_file).read().splitlines()
    by_run = spans_by_run(otlp, lines, out_file)
    run_id = os.path.basename(results)
    totals = Counter()
    for folder in run_folders(results):
        key = f"{run_id}/{os.path.basename(folder)}"
        spans, errors = check_run(c, folder, run_id, by_run.get(key, []), binary)
        totals["spans"] += spans
        totals["errors"] += errors
        totals["links"] += check_links(c, key, by_run.get(key, []))
    c.expect(set(by_run) == {f"{run_id}/{os.path.basename(f)}" for f in run_folders(results)}, "runs exported != runs")
    return lines, totals


def mode_export(otlp, binary, work):
    c = Checker()
    methods = "preload,strace" + (",uprobe" if os.geteuid() == 0 else "")
    out = os.path.join(work, "results")
    harness(binary, "--workload", "errors", "--method", methods, "--linkage", "both", "--out", out)
    results = results_of(out)
    lines, totals = export_and_check(c, otlp, binary, results, os.path.join(work, "a.jsonl"))
    c.expect(totals["errors"] > 0, "the errors workload exported no ERROR span")
    # The same run exports the same bytes (ids are derived, not drawn).
    again = os.path.join(work, "b.jsonl")
    harness(binary, "--export-otlp", results, "-o", again)
    c.expect(open(again).read().splitlines() == lines, "a second export differs from the first")
    # One run folder alone gives that run's lines; -o never overwrites.
    one = run_folders(results)[0]
    harness(binary, "--export-otlp", one)
    c.expect(os.path.exists(os.path.join(one, "otlp.jsonl")), "no default otlp.jsonl in a run folder")
    p = harness(binary, "--export-otlp", results, "-o", again, check=False)
    c.expect(p.returncode == 2 and "exists" in p.stderr, f"-o over an existing file: {p.returncode} {p.stderr!r}")
    # One damaged run costs that run, named with its reason: the others are still exported.
    folders = run_folders(results)
    damaged = folders[-1]
    store = os.path.join(damaged, "events.msgpack.zst")
    if os.path.exists(store):
        with open(store, "r+b") as f:
            f.seek(max(0, os.path.getsize(store) // 2))
            f.truncate()
        partial = os.path.join(work, "c.jsonl")
        p = harness(binary, "--export-otlp", results, "-o", partial, check=False)
        c.expect(p.returncode == 1, f"an export with a damaged run: exit {p.returncode}, want 1")
        c.expect(f"run not exported: {os.path.basename(damaged)}" in p.stderr, f"the damaged run unnamed: {p.stderr!r}")
        exported = spans_by_run(otlp, open(partial).read().splitlines(), partial)
        c.expect(len(exported) == len(folders) - 1, f"{len(exported)} runs exported of {len(folders)}, one damaged")
    c.finish(f"{totals['spans']} spans of {len(run_folders(results))} runs ({methods}), "
             f"{totals['errors']} with status ERROR, {len(lines)} lines, decoded with opentelemetry-proto")


def mode_links(otlp, binary, work):
    """A run folder as cupti writes one: launches and kernels sharing correlation ids, a
    kernel whose launch was lost, an untimed event, and a run without any event."""
    c = Checker()
    results = os.path.join(work, "20990101-000000-synthetic")
    shutil.rmtree(results, ignore_errors=True)
    folder = os.path.join(results, "runs", "vecadd.shared.cupti.r1")
    os.makedirs(folder)
    json.dump({"v": 1, "run_id": os.path.basename(results), "environment": {
        "gpu": {"available": True, "devices": [{"name": "Test GPU"}], "driver_version": "580.0"}}},
        open(os.path.join(results, "manifest.json"), "w"))
    run = {"method": "cupti", "workload": "vecadd", "linkage": "shared", "rep": 1, "ok": True, "failures": [],
           "argv": ["vecadd.shared"], "unobserved": [], "partly_observed": [],
           "clock": {"realtime_minus_monotonic_ns": 1_700_000_000_000_000_000, "uncertainty_ns": 10},
           "tracer": {"loss": {"ring_full": 3, "activity_dropped_by_cupti": 0}, "error": ""}}
    json.dump(run, open(os.path.join(folder, "run.json"), "w"))
    ev = []
    def add(layer, name, ts, dur, corr=None, ret=None, pid=100, tid=101, **args):
        e = {"v": 1, "layer": layer, "name": name, "ts": ts, "pid": pid, "tid": tid, "args": args}
        if dur is not None:
            e["dur"] = dur
        if ret is not None:
            e["ret"] = ret
        if corr is not None:
            e["corr"] = corr
        ev.append(e)
    for i in range(3):
        add("runtime", "cudaLaunchKernel", 1000 + 100 * i, 20, corr=10 + i, ret=0, grid=[1, 1, 1])
        add("driver", "cuLaunchKernel", 1005 + 100 * i, 10, corr=10 + i, ret=0)
        add("gpu-activity", "vecAdd", 1050 + 100 * i, 30, corr=10 + i, kernel="vecAdd", grid=[4, 1, 1])
    add("gpu-activity", "orphan", 2000, 5, corr=99)                       # its launch was not seen
    add("runtime", "cudaMalloc", 2100, 7, corr=20, ret=2, bytes=1 << 50)  # failed: ERROR
    add("runtime", "cudaFree", 0, None, corr=21, ret=0)                   # no time: counted, not exported
    add("runtime", "cudaLaunchKernel", 3000, 20, corr=10, ret=0, pid=200)  # same id, another process
    add("gpu-activity", "vecAdd", 3050, 30, corr=10, pid=200)
    with open(os.path.join(folder, "events.jsonl"), "w") as f:
        for e in ev:
            f.write(json.dumps(e) + "\n")
    empty = os.path.join(results, "runs", "vecadd.shared.uprobe.r1")
    os.makedirs(empty)
    json.dump(dict(run, method="uprobe", unobserved=[{"layer": "driver", "reason": "no libcuda"}],
                   tracer={"loss": {"ring_full": 0}, "error": ""}), open(os.path.join(empty, "run.json"), "w"))

    out_file = os.path.join(work, "links.jsonl")
    if os.path.exists(out_file):
        os.remove(out_file)
    p = harness(binary, "--export-otlp", results, "-o", out_file)
    lines = open(out_file).read().splitlines()
    by_run = spans_by_run(otlp, lines, out_file)
    key = f"{os.path.basename(results)}/vecadd.shared.cupti.r1"
    entries = by_run[key]
    spans = [s for _, _, s in entries if s is not None]
    c.expect(len(spans) == len(ev) - 1, f"{len(spans)} spans of {len(ev)} events, one untimed")
    c.expect("1 events without a time" in p.stdout, f"the untimed event is not reported: {p.stdout!r}")
    c.expect("(4 linked to their launch)" in p.stdout, f"the console counts linked kernels, not links: {p.stdout!r}")
    c.expect(check_links(c, key, entries) == 4, "4 kernels linked (3 in pid 100, 1 in pid 200)")
    for ra, _, s in entries:
        c.expect(ra["cudatrace.gpu.name"] == "Test GPU" and ra["cudatrace.loss.ring_full"] == 3
                 and ra["cudatrace.loss.total"] == 3, "GPU or loss counters missing on the resource")
        if s is not None and s.name == "vecAdd" and ra["process.pid"] == 100:
            c.expect(len(s.links) == 2, f"a kernel links to its runtime and driver launch: {len(s.links)}")
        if s is not None and s.name == "cudaMalloc":
            c.expect(s.status.message == "cudaErrorMemoryAllocation", f"cudaMalloc status {s.status.message!r}")
            c.expect(s.start_time_unix_nano == 1_700_000_000_000_000_000 + 2100, "Unix time = event + recorded offset")
            c.expect(attrs(s.attributes)["cuda.arg.bytes"] == 1 << 50, "an argument as cuda.arg.*")
        if s is not None and s.name == "orphan":
            c.expect(len(s.links) == 0, "a kernel whose launch was lost has no link")
    resource_of = {ra["process.pid"]: ra for ra, _, _ in entries}
    c.expect(resource_of[100]["cudatrace.export.events_without_time"] == 1, "events_without_time on its resource")
    traces_of = defaultdict(set)
    for ra, _, s in entries:
        if s is not None:
            traces_of[ra["process.pid"]].add(s.trace_id)
    c.expect(sorted(traces_of) == [100, 200] and all(len(t) == 1 for t in traces_of.values())
             and traces_of[100] != traces_of[200], f"a trace per process: {dict(traces_of)}")
    bare = by_run.get(f"{os.path.basename(results)}/vecadd.shared.uprobe.r1", [])
    c.expect(len(bare) == 1 and bare[0][2] is None and bare[0][0]["cudatrace.layers_not_observed"] == ["driver: no libcuda"],
             "a run without events still exports its resource with what it did not observe")
    c.finish(f"{len(spans)} spans, links checked, {len(lines)} lines")


class Receiver(http.server.ThreadingHTTPServer):
    """An OTLP/HTTP receiver that answers the first two requests 503 and 429, then 200,
    and keeps every body it accepted."""
    def __init__(self, otlp):
        self.otlp, self.bodies, self.requests, self.refusals = otlp, [], 0, [503, 429]
        super().__init__(("127.0.0.1", 0), ReceiverHandler)


class ReceiverHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_POST(self):
        srv = self.server
        body = self.rfile.read(int(self.headers["Content-Length"]))
        srv.requests += 1
        if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/json":
            self.send_response(404)
            self.end_headers()
            return
        if srv.refusals:
            self.send_response(srv.refusals.pop(0))
            self.send_header("Retry-After", "0")
            self.end_headers()
            return
        try:  # the collector's request message: ExportTraceServiceRequest
            srv.otlp.decode(body.decode(), "request", "ExportTraceServiceRequest")
        except Exception as e:  # noqa: BLE001
            self.send_response(400)
            self.end_headers()
            self.wfile.write(str(e).encode())
            return
        srv.bodies.append(body.decode())
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")


def mode_endpoint(otlp, binary, work):
    c = Checker()
    rx = Receiver(otlp)
    threading.Thread(target=rx.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{rx.server_address[1]}"
    out = os.path.join(work, "sent")
    p = harness(binary, "--workload", "errors", "--method", "preload,strace", "--linkage", "shared", "--out", out,
                "--otlp-endpoint", url)
    results = results_of(out)
    summary = json.load(open(os.path.join(results, "summary.json")))
    c.expect(summary["otlp"]["error"] is None, f"send failed: {summary['otlp']}")
    c.expect(summary["otlp"]["retries"] == 2 and summary["otlp"]["runs_sent"] == 2, f"retries/runs: {summary['otlp']}")
    c.expect("OTLP: sent" in p.stderr, "no OTLP line on the console")
    exported = os.path.join(work, "sent.jsonl")
    if os.path.exists(exported):
        os.remove(exported)
    harness(binary, "--export-otlp", results, "-o", exported)
    c.expect(sorted(rx.bodies) == sorted(open(exported).read().splitlines()),
             f"the receiver got {len(rx.bodies)} bodies, not the exported file's lines")
    by_run = spans_by_run(otlp, rx.bodies, "received")
    for folder in run_folders(results):
        key = f"{os.path.basename(results)}/{os.path.basename(folder)}"
        check_run(c, folder, os.path.basename(results), by_run.get(key, []), binary)
    # --export-otlp with --otlp-endpoint sends the file.
    before = len(rx.bodies)
    harness(binary, "--export-otlp", results, "-o", os.path.join(work, "resend.jsonl"), "--otlp-endpoint", url + "/v1/traces")
    os.remove(os.path.join(work, "resend.jsonl"))
    c.expect(len(rx.bodies) - before == len(open(exported).read().splitlines()), "--export-otlp did not send the file")
    rx.shutdown()

    # Nobody listening: one line, and the run succeeds with its results.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    s.close()
    p = harness(binary, "--workload", "errors", "--method", "preload,strace", "--linkage", "shared", "--out", out,
                "--otlp-endpoint", dead, check=False)
    lines = [line for line in p.stderr.splitlines() if "OTLP" in line]
    c.expect(p.returncode == 0, f"an unreachable collector changed the exit status to {p.returncode}")
    c.expect(len(lines) == 2 and "cannot reach" in lines[0] and "NOT SENT" in lines[1],
             f"expected the error line and the closing line, got {lines}")
    results = results_of(out)
    c.expect(json.load(open(os.path.join(results, "summary.json")))["otlp"]["error"], "summary.json has no OTLP error")
    c.expect(all(os.path.exists(os.path.join(f, "events.msgpack.zst")) for f in run_folders(results)), "results missing")
    p = harness(binary, "--workload", "errors", "--otlp-endpoint", "localhost:4318", check=False)
    c.expect(p.returncode == 2 and "http://" in p.stderr, f"a URL without a scheme: {p.returncode} {p.stderr!r}")
    c.finish(f"{len(rx.bodies)} requests decoded as ExportTraceServiceRequest after 503 and 429; unreachable: {lines[0]}")


def mode_gpu(otlp, binary, work):
    """On a GPU, as root: vecadd under cupti, every kernel linked to its launch."""
    listing = harness(binary, "--list").stdout
    if "\nGPU: yes" not in listing or os.geteuid() != 0:
        print("SKIP: needs a GPU and root (cupti's collector is eBPF)")
        sys.exit(SKIP)
    c = Checker()
    out = os.path.join(work, "gpu")
    harness(binary, "--workload", "vecadd", "--method", "cupti", "--linkage", "both", "--out", out)
    results = results_of(out)
    _, totals = export_and_check(c, otlp, binary, results, os.path.join(work, "gpu.jsonl"))
    kernels = sum(1 for f in run_folders(results) for e in run_events(binary, f)
                  if e["layer"] == "gpu-activity")
    c.expect(kernels > 0 and totals["links"] == kernels, f"{totals['links']} of {kernels} kernels linked")
    c.finish(f"{totals['spans']} spans, {totals['links']} of {kernels} kernels linked to their launch")


def mode_existing(otlp, binary, results):
    """Any results folder, e.g. of `harness -- python3 train.py`: exported beside it and checked."""
    c = Checker()
    out_file = os.path.join(results, "otlp-check.jsonl")
    lines, totals = export_and_check(c, otlp, binary, results, out_file)
    per_run = Counter()
    said = {}  # method -> what its exported resource says it could not see
    for n, line in enumerate(lines, 1):
        for rs in otlp.decode(line, f"{out_file}:{n}").resource_spans:
            ra = attrs(rs.resource.attributes)
            said[ra["cudatrace.method"]] = (ra.get("cudatrace.layers_not_observed", []) +
                                            ra.get("cudatrace.layers_partly_observed", []))
            for ss in rs.scope_spans:
                for span in ss.spans:
                    per_run[(ra["cudatrace.method"], attrs(span.attributes)["cudatrace.layer"])] += 1
    for (method, layer), n in sorted(per_run.items()):
        print(f"  {method:10s} {layer:13s} {n} spans")
    for method, reasons in sorted(said.items()):
        for r in reasons:
            print(f"  {method:10s} resource says: {r[:300]}")
    c.finish(f"{totals['spans']} spans, {totals['links']} kernels linked, {totals['errors']} ERROR, {len(lines)} lines")


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    defs, binary, work, mode = sys.argv[1:]
    work = os.path.normpath(work)  # its base name is the run id
    if mode != "existing":
        shutil.rmtree(work, ignore_errors=True)  # this test's own folder: results of an earlier run go
        os.makedirs(work)
    otlp = Otlp(defs)
    modes = {"export": mode_export, "links": mode_links, "endpoint": mode_endpoint, "gpu": mode_gpu,
             "existing": mode_existing}
    modes[mode](otlp, binary, work)


if __name__ == "__main__":
    main()

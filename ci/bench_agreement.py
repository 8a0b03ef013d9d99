#!/usr/bin/env python3
"""Do two `harness --bench` runs agree? The bar of issue 19: every per-call cost above
100 ns agrees within 10%, or within the two runs' 95% intervals where those are narrower.
The cost compared is the in-process A/B where the method pauses in process (the figure
the report leads with), else the difference to `none` between processes. Two runs that
both read "no measurable cost" (bench_stats: noise, shown as such) agree on it.
    usage: ci/bench_agreement.py RUN_A/bench_summary.json RUN_B/bench_summary.json
Exit status 0 when every compared cost agrees, 1 otherwise."""
import json
import sys


def costs(path):
    out = {}
    for r in json.load(open(path))["rows"]:
        if r["method"] == "none":
            continue
        key = (r["call"], r["linkage"], r["method"])
        if "in_process_delta_ns" in r:
            out[key] = ("in-process", r["in_process_delta_ns"], r["in_process_delta_ci95_ns"],
                        r.get("in_process_no_measurable_cost", False))
        elif "delta_ns" in r:
            out[key] = ("between", r["delta_ns"], r["delta_ci95_ns"], r.get("no_measurable_cost", False))
    return out


a, b = costs(sys.argv[1]), costs(sys.argv[2])
bad = compared = 0
print(f"{'call':28} {'cudart':7} {'method':13} {'kind':10} {'run A':>9} {'run B':>9} {'diff':>7}  verdict")
for key in sorted(set(a) & set(b)):
    kind, va, ia, noise_a = a[key]
    _, vb, ib, noise_b = b[key]
    if max(va, vb) <= 100:
        continue
    compared += 1
    rel = abs(va - vb) / max(abs(va), abs(vb))
    overlap = ia[0] <= ib[1] and ib[0] <= ia[1]
    narrow = max(ia[1] - ia[0], ib[1] - ib[0]) < 0.1 * max(abs(va), abs(vb))
    ok = (noise_a and noise_b) or (rel <= 0.10 and (overlap or not narrow))
    bad += not ok
    print(f"{key[0]:28} {key[1]:7} {key[2]:13} {kind:10} {va:+9.1f} {vb:+9.1f} {rel:6.1%}  {'ok' if ok else 'DISAGREE'}")
print(f"{compared - bad} of {compared} costs above 100 ns agree")
sys.exit(1 if bad else 0)

#!/usr/bin/env bash
# Renders the report from real H100 results and opens it in headless Chromium: the charts
# must be there as images that decoded, and the tables must be filled.
#   usage: check_report.sh GENERATOR FIXTURES OUT_DIR      (exit 77 = skipped, with the reason)
set -euo pipefail
generator=$1 fixtures=$2 out=$3
/usr/bin/python3 -c "import matplotlib" 2>/dev/null || { echo "SKIP: python3-matplotlib missing"; exit 77; }
# A cost measured without one of the method's layers is marked in red with the reason
# (bench.cpp, layers_not_covered and layers_partly_covered): the recorded run, with
# preload's static rows and uprobe's shared ones so marked.
mkdir -p "$out/uncovered/bench"
/usr/bin/python3 - "$fixtures/bench" "$out/uncovered/bench" <<'PY'
import json, os, shutil, sys
src, dst = sys.argv[1], sys.argv[2]
for f in os.listdir(src):
    shutil.copy(os.path.join(src, f), dst)
path = os.path.join(dst, "bench_summary.json")
summary = json.load(open(path))
for r in summary["rows"]:
    if r["method"] == "preload" and r["linkage"] == "static":
        r["layers_not_covered"] = {"runtime": "cudart is linked statically <into> the executable"}
    if r["method"] == "uprobe" and r["linkage"] == "shared":
        r["layers_partly_covered"] = {"runtime": "a stripped cudart in libfoo.so"}
json.dump(summary, open(path, "w"))
PY
/usr/bin/python3 "$generator" "$out/uncovered/bench" -o "$out/uncovered.html" >/dev/null
marked=$(grep -o 'class="bad" title="cudart is linked statically &lt;into&gt; the executable">without its runtime layer' \
  "$out/uncovered.html" | wc -l || true)
[[ $marked == 10 ]] || { echo "FAIL: $marked of preload's 10 static rows marked without their runtime layer"; exit 1; }
partly=$(grep -o 'class="bad" title="a stripped cudart in libfoo.so">without part of its runtime layer' \
  "$out/uncovered.html" | wc -l || true)
[[ $partly == 10 ]] || { echo "FAIL: $partly of uprobe's 10 shared rows marked without part of their runtime layer"; exit 1; }

browser=$(command -v chromium || command -v chromium-browser || true)
[[ -n "$browser" ]] || { echo "SKIP: chromium missing (ci/install-deps.sh --test installs it)"; exit 77; }
mkdir -p "$out"
/usr/bin/python3 "$generator" "$fixtures/matrix" "$fixtures/bench" "$fixtures/bench-devhook" -o "$out/overhead.html"

# Let the page load, then ask the browser itself what it rendered.
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --user-data-dir="$out/profile" --virtual-time-budget=3000)
probe='<script>window.onload=()=>{const r=[];for(const i of document.images)r.push(i.id+"="+i.naturalWidth+"x"+i.naturalHeight);
for(const t of document.querySelectorAll("table"))r.push(t.id+":rows="+t.tBodies[0].rows.length);
document.title="PROBE "+r.join(" ");}</script>'
PROBE="$probe" /usr/bin/python3 -c 'import os,sys; p=open(sys.argv[1]).read(); open(sys.argv[2],"w").write(p.replace("</body>", os.environ["PROBE"]+"</body>"))' \
  "$out/overhead.html" "$out/probed.html"
dom=$(timeout 60 "$browser" "${flags[@]}" --dump-dom "file://$out/probed.html" 2>/dev/null)
title=$(grep -o '<title>PROBE [^<]*' <<<"$dom" | sed 's/<title>PROBE //')
echo "rendered: $title"
timeout 60 "$browser" "${flags[@]}" --window-size=1300,2400 --screenshot="$out/overhead.png" "file://$out/overhead.html" >/dev/null 2>&1 || true

fail=0
expect() { grep -Eq "$1" <<<"$title" || { echo "FAIL: $2"; fail=1; }; }
expect 'per-call-chart=[0-9]{3,}x[0-9]{3,}' "per-call chart did not render"
expect 'per-call-cost-chart=[0-9]{3,}x[0-9]{3,}' "per-call cost chart (a launch and a cheap call per method) did not render"
expect 'completeness-heatmap=[0-9]{3,}x[0-9]{3,}' "completeness heatmap did not render"
expect 'per-call-table:rows=250' "per-call table should have 250 rows (10 calls x 2 linkages x 11 methods and references; 10 x shared x preload, devhook, devhook-thread)"
# How far each untraced call moved between processes: 10 calls x 2 linkages of the full bench
# run (the devhook one predates the measure), the widest flagged.
expect 'untraced-spread:rows=20' "untraced-spread table should have 20 rows"
grep -q 'How far the untraced calls moved' "$out/overhead.html" || { echo "FAIL: no untraced-spread section"; fail=1; }
grep -q 'in-process A/B' "$out/overhead.html" || { echo "FAIL: no in-process A/B column"; fail=1; }
# The fixtures have differences below zero and intervals reaching it: never a speed-up.
grep -q 'no measurable cost' "$out/overhead.html" || { echo "FAIL: noise not shown as no measurable cost"; fail=1; }
expect 'fidelity-table:rows=[1-9]' "fidelity table is empty"
expect 'loss-table:rows=[1-9]' "loss table is empty"
expect 'slowdown-table:rows=[1-9]' "slowdown table is empty"
expect 'environment:rows=7' "environment table incomplete"
grep -q 'id="skipped"' "$out/overhead.html" || { echo "FAIL: no skipped section"; fail=1; }
grep -q 'NVIDIA H100 80GB HBM3' "$out/overhead.html" || { echo "FAIL: GPU missing from the environment"; fail=1; }
exit $fail

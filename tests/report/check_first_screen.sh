#!/usr/bin/env bash
# The report's first screen in a real browser, drawn from recorded results (the H100's matrix,
# benchmark and PyTorch command in docs/results/h100, two recorded cost and two-GPU runs from
# analysis/tests/fixtures, and a command whose outside strings carry HTML): at 1280 x 900 the
# one-row-per-method table and its run facts fit without scrolling, nothing overflows
# sideways, and the page logs nothing to the console and raises no error. The screenshot
# stays in OUT_DIR as the test's artifact.
#   usage: check_first_screen.sh SOURCE_DIR OUT_DIR      (exit 77 = skipped, with the reason)
set -euo pipefail
src=$1 out=$2
py=$("$src/analysis/find_python3.sh" 2>&1) || { echo "SKIP: $py"; exit 77; }
browser=$(command -v chromium || command -v chromium-browser || true)
[[ -n "$browser" ]] || { echo "SKIP: chromium missing (ci/install-deps.sh --test installs it)"; exit 77; }
rm -rf "$out" && mkdir -p "$out"
"$py" "$src/reports/generate_report.py" "$src/docs/results/h100/matrix" "$src/docs/results/h100/bench" \
  "$src/docs/results/h100/torch-command" "$src/analysis/tests/fixtures/cost-command" \
  "$src/analysis/tests/fixtures/twogpu-command" "$src/tests/report/fixtures/hostile" -o "$out/overhead.html"

# Errors are caught from the first line on (window errors, resources that failed, console
# output of any level); the sizes are read once the page has loaded, into the title.
head='<script>window.__errs=[];addEventListener("error",function(e){__errs.push("error "+(e.message||(e.target&&e.target.outerHTML)||"?"))},true);
["error","warn","log","info"].forEach(function(k){var f=console[k];console[k]=function(){__errs.push(k+" "+Array.prototype.join.call(arguments," "));f.apply(console,arguments)}});</script>'
probe='<script>addEventListener("load",function(){var o=document.getElementById("overview"),f=document.getElementById("facts");
var r=o?o.getBoundingClientRect():{bottom:-1,right:-1};var fb=f?f.getBoundingClientRect().bottom:-1;var wide=[];
document.querySelectorAll("body *").forEach(function(e){var b=e.getBoundingClientRect();if(b.right>innerWidth+0.5&&!e.closest(".wide"))wide.push(e.tagName+(e.id?"#"+e.id:""))});
document.title="PROBE inner="+innerWidth+"x"+innerHeight+" table_bottom="+Math.ceil(r.bottom)+" facts_bottom="+Math.ceil(fb)+" scroll_width="+document.documentElement.scrollWidth+" rows="+(o?o.tBodies[0].rows.length:0)+" wide="+(wide.slice(0,5).join(",")||"none")+" errors="+__errs.length+" "+__errs.slice(0,3).join(" | ")})</script>'
HEAD="$head" PROBE="$probe" "$py" -c 'import os,sys; p=open(sys.argv[1],encoding="utf-8").read()
p=p.replace("<head>","<head>"+os.environ["HEAD"],1).replace("</body>",os.environ["PROBE"]+"</body>",1)
open(sys.argv[2],"w",encoding="utf-8").write(p)' "$out/overhead.html" "$out/probed.html"
flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --disable-quic --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --user-data-dir="$out/profile" --window-size=1280,900
       --virtual-time-budget=5000 --enable-logging=stderr --v=0)
timeout 90 "$browser" "${flags[@]}" --dump-dom "file://$out/probed.html" >"$out/dom.html" 2>"$out/browser.log" || true
timeout 90 "$browser" "${flags[@]}" --screenshot="$out/first-screen.png" "file://$out/overhead.html" >/dev/null 2>>"$out/browser.log" || true
title=$(grep -o '<title>PROBE [^<]*' "$out/dom.html" | sed 's/<title>PROBE //' || true)
echo "rendered: $title"
echo "screenshot: $out/first-screen.png"
fail=0
[[ -n $title ]] || { echo "FAIL: the page did not load in $browser (see $out/browser.log)"; exit 1; }
num() { grep -o "$1=-\?[0-9]*" <<<"$title" | cut -d= -f2; }
# The first screen: 900 px, or less where the browser's window left less to the page.
inner=$(grep -o 'inner=[0-9]*x[0-9]*' <<<"$title" | cut -dx -f2)
limit=$((inner < 900 ? inner : 900))
[[ $(num table_bottom) -gt 0 && $(num table_bottom) -le $limit ]] || { echo "FAIL: the method table ends at $(num table_bottom) px, past the first $limit"; fail=1; }
[[ $(num facts_bottom) -gt 0 && $(num facts_bottom) -le $limit ]] || { echo "FAIL: the run facts end at $(num facts_bottom) px, past the first $limit"; fail=1; }
[[ $(num scroll_width) -le 1280 ]] || { echo "FAIL: the page is $(num scroll_width) px wide at 1280: it overflows sideways"; fail=1; }
grep -q ' wide=none ' <<<"$title" || { echo "FAIL: elements overflow the window sideways: $(grep -o 'wide=[^ ]*' <<<"$title")"; fail=1; }
[[ $(num rows) -ge 10 ]] || { echo "FAIL: the method table has $(num rows) rows (13 methods ran)"; fail=1; }
[[ $(num errors) == 0 ]] || { echo "FAIL: the page raised or logged: $(sed 's/.* errors=//' <<<"$title")"; fail=1; }
if grep -q 'CONSOLE' "$out/browser.log"; then echo "FAIL: console output: $(grep CONSOLE "$out/browser.log" | head -3)"; fail=1; fi
# Outside strings are text: the hostile command's markup is shown, never parsed.
grep -q 'onerror="console' "$out/overhead.html" && { echo "FAIL: an outside string reached the page unescaped"; fail=1; }
grep -q 'evil&lt;img src=x onerror=' "$out/overhead.html" || { echo "FAIL: the hostile command is not named (escaped)"; fail=1; }
[[ -s $out/first-screen.png ]] || { echo "FAIL: no screenshot"; fail=1; }
exit $fail

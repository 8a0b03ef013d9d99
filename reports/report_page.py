"""The report's page tools, shared by every section module: the chart as an inline PNG, escaping,
tables that sort and filter in the page, folded sections, the page's style and script.
Nothing here reads results; generate_report.py puts the analysis package on the path first."""
import base64
import html
import io
import sys

import cudatrace_results as results

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.patches  # noqa: F401 (the section modules draw legends with it)
    import matplotlib.pyplot as plt
    import matplotlib.ticker  # noqa: F401
except ImportError:
    sys.exit("generate_report: python3-matplotlib is missing (apt-get install python3-matplotlib)")


def png(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def esc(x):
    return html.escape(str(x))


def table(headers, rows, table_id, empty="Nothing to show."):
    """A table, scrolling inside its own box where it is wider or taller than a screen; never
    one with headers and no rows: `empty` says why there is none. A long one can be sorted
    (click a heading) and filtered (the box above it) in the page (SCRIPT, no server)."""
    if not rows:
        return f'<p id="{table_id}" class="empty">{esc(empty)}</p>'
    long = len(rows) > 12
    out = []
    if long:
        out.append(f'<input class="filter" type="search" data-table="{table_id}" '
                   f'placeholder="filter these {len(rows)} rows (every word must match)">')
    out.append(f'<div class="wide"><table id="{table_id}"{" class=sortable" if long else ""}><thead><tr>'
               + "".join(f"<th>{esc(h)}</th>" for h in headers) + "</tr></thead><tbody>")
    for r in rows:
        out.append("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>")
    out.append("</tbody></table></div>")
    return "\n".join(out)


def section(anchor, title, body, note=""):
    """A section folded by default; opened, it scrolls inside one screen."""
    return (f'<details id="{esc(anchor)}" class="sec"><summary><h2>{esc(title)}</h2>'
            f'{" <span class=note>" + note + "</span>" if note else ""}</summary>'
            f'<div class="body">{body}</div></details>')


# Sorting, filtering and opening the section a link points to: inline, no external script.
SCRIPT = """<script>
(function(){
function openTarget(){var id=decodeURIComponent(location.hash.slice(1));if(!id)return;var e=document.getElementById(id);
 for(var d=e;d;d=d.parentElement){if(d.tagName==='DETAILS')d.open=true;}if(e)e.scrollIntoView();}
window.addEventListener('hashchange',openTarget);openTarget();
function key(td){var t=td?td.textContent.trim():'';var m=t.match(/^[+-]?[0-9][0-9,]*(\\.[0-9]+)?/);
 return m?[0,parseFloat(m[0].replace(/,/g,''))]:[1,t.toLowerCase()];}
document.querySelectorAll('table.sortable').forEach(function(t){
 t.querySelectorAll('thead th').forEach(function(th,i){th.title='click to sort';th.style.cursor='pointer';
  th.addEventListener('click',function(){var b=t.tBodies[0],rows=Array.prototype.slice.call(b.rows);
   var dir=th.dataset.dir==='1'?-1:1;th.dataset.dir=dir===1?'1':'-1';
   rows.sort(function(x,y){var a=key(x.cells[i]),c=key(y.cells[i]);if(a[0]!==c[0])return a[0]-c[0];
    return (a[1]<c[1]?-1:a[1]>c[1]?1:0)*dir;});rows.forEach(function(r){b.appendChild(r);});});});});
document.querySelectorAll('input.filter').forEach(function(f){f.addEventListener('input',function(){
 var words=f.value.toLowerCase().split(/\\s+/).filter(Boolean);var t=document.getElementById(f.dataset.table);
 Array.prototype.forEach.call(t.tBodies[0].rows,function(r){var x=r.textContent.toLowerCase();
  r.style.display=words.every(function(w){return x.indexOf(w)>=0;})?'':'none';});});});
})();
</script>"""


def reason_cell(full):
    """A reason as a reader takes it in: one line per distinct clause, naming libraries rather
    than their paths; the whole text behind a disclosure where that dropped anything."""
    lines = results.reason_lines(full)
    short = "<br>".join(esc(l) for l in lines)
    if "\n".join(lines) == full:
        return f'<span class="bad">{short}</span>'
    return (f'<details class="reason"><summary class="bad">{short}</summary>'
            f'<span class="full">{esc(full)}</span></details>')



# The page's look: the first screen's table tinted by status, sections folded, wide tables
# scrolling inside their own box.
STYLE = """<style>body{font-family:sans-serif;max-width:1240px;margin:0 auto;padding:6px 12px;color:#222;box-sizing:border-box}
h1{font-size:20px;margin:6px 0}h2{display:inline;font-size:17px}h3{font-size:15px}
.wide{max-width:100%;overflow-x:auto}table{border-collapse:collapse;margin:0.6em 0;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#eee}td:first-child{text-align:left}
img{max-width:100%}.good{color:#070}.bad{color:#b00}.part{color:#a60}.empty{color:#555;font-style:italic}
#unobserved td,[id^=command-coverage] td:last-child{text-align:left;max-width:44em;overflow-wrap:anywhere}
details.reason .full{display:block;white-space:pre-wrap;font-size:12px;color:#444}
summary{cursor:pointer}details.sec{border-top:1px solid #ccc;padding:4px 0}
details.sec>.body{max-height:calc(100vh - 60px);overflow:auto}.note{color:#555;font-size:13px}
#overview{font-size:12.5px;margin:4px 0;width:100%}#overview td,#overview th{padding:3px 5px;text-align:center;overflow-wrap:anywhere}
#overview tbody th{text-align:left}#overview a{color:inherit;text-decoration:none}#overview a:hover{text-decoration:underline}
#overview td.good{background:#e6f4ea}#overview td.part{background:#fdf1dc}#overview td.bad{background:#fbe3e3}
#overview td.none,#overview td.na{background:#f4f4f4;color:#777}#facts,.legend{margin:2px 0;font-size:12.5px;color:#444}
input.filter{width:30em;max-width:100%;margin-top:6px}</style>"""

"""Everything that reads what the harness wrote: one loader, the benchmark's decisions as the
C++ wrote them, and the wording shared by the report and the results docs.

The C++ decides (harness/stats/bench_stats.h: what is "no measurable cost"; harness/score/verdict.cpp:
coverage and reasons); this package only reads and presents. A result file of a version it
does not know is refused, never guessed at.
"""
from .load import (SUPPORTED_VERSIONS, SchemaError, Run, load_json, load_result, load_run, load_runs,
                   schema_version)
from .bench import (Cost, cost_of, between_is_noise, in_process_is_noise, rows_by_key, agreement, estimators,
                    uprobe_split, calls_skipped, agreement_lines, target_text, target_againsts,
                    cost_parts, part_text, per_record_text, per_record_bar_lines, estimator_figures)
from .reasons import short_reason, reason_lines, grouped_reasons
from .percall import load_percall_folder
from . import devices
from . import overview
from .cost import cost_programs, program_label, mark_summary, from_marked_runs

__all__ = [
    "SUPPORTED_VERSIONS", "SchemaError", "Run", "load_json", "load_result", "load_run", "load_runs", "schema_version",
    "Cost", "cost_of", "between_is_noise", "in_process_is_noise", "rows_by_key", "agreement", "estimators",
    "uprobe_split", "calls_skipped", "agreement_lines", "target_text", "target_againsts", "cost_parts", "part_text",
    "per_record_text", "per_record_bar_lines", "estimator_figures",
    "short_reason", "reason_lines", "grouped_reasons", "load_percall_folder", "devices", "overview",
    "cost_programs", "program_label", "mark_summary", "from_marked_runs",
]

"""A method's reasons as a reader takes them in: long file paths shortened to the library's
name, and the same reason given for many programs said once."""
import os
import re

# An absolute path to a shared library or executable inside a reason (a site-packages
# folder, a CUDA install): the reader needs the file's name, the full text keeps the rest.
_PATH = re.compile(r"(?<![\w.])/(?:[^\s,;:()'\"]+/)+([^\s,;:()'\"/]+)")


def short_reason(text):
    """The reason with every absolute path reduced to its last component."""
    return _PATH.sub(lambda m: m.group(1), text)


def _libraries(text):
    return sorted({os.path.basename(m.group(0)) for m in _PATH.finditer(text)})


def grouped_reasons(items):
    """items: (where, method, layer, reason, partly) tuples -> one entry per (method, layer,
    partly, reason as reason_lines says it), in a stable order:
    {"method", "layer", "partly", "short", "libraries", "full": [distinct full texts], "where": [...]}."""
    groups = {}
    for where, method, layer, reason, partly in items:
        key = (method, layer, bool(partly), "\n".join(reason_lines(reason)))
        g = groups.setdefault(key, {"method": method, "layer": layer, "partly": bool(partly), "short": key[3],
                                    "libraries": set(), "full": [], "where": []})
        g["libraries"].update(_libraries(reason))
        if reason not in g["full"]:
            g["full"].append(reason)
        if where not in g["where"]:
            g["where"].append(where)
    out = []
    for key in sorted(groups):
        g = groups[key]
        g["libraries"] = sorted(g["libraries"])
        out.append(g)
    return out


def reason_lines(text):
    """A reason as a few lines: clauses (split at "; ") that say the same of different
    libraries become one line naming all of them, paths cut to the library's name."""
    order, libs_of = [], {}
    for part in (p.strip() for p in text.split("; ")):
        if not part:
            continue
        libs = [m.group(1) for m in _PATH.finditer(part)]
        template = re.sub(r"\{\}(?:, \{\})+", "{}", _PATH.sub("{}", part.replace("{", "{{").replace("}", "}}")))
        if template not in libs_of:
            order.append(template)
            libs_of[template] = []
        libs_of[template] += [lib for lib in libs if lib not in libs_of[template]]
    lines = []
    for template in order:
        libs = libs_of[template]
        holes = template.count("{}")
        if holes == 1:
            lines.append(template.format(", ".join(libs)))
        else:
            # Several paths in different places of one clause: name them where they stood.
            filled = libs + [""] * max(0, holes - len(libs))
            lines.append(template.format(*filled[:holes]))
    return lines

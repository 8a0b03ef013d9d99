"""What the harness's Python hooks share (torchprof's and jaxprof's, whose cards say what
each does).

Copied beside each method's own hook module (lib/cudatrace/<method>/), so that the one folder
the harness puts on PYTHONPATH holds all a hook needs. It imports nothing heavy: it is loaded
by sitecustomize at every interpreter start, in programs that never use the profiled library.
"""
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys


def replace_json(path, value):
    """Writes `value` to `path` whole (a rename): the harness never reads half a status, and a
    process killed while writing leaves the previous one, which still says what it reached."""
    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as f:
            json.dump(value, f)
        os.replace(tmp, path)
    except OSError:
        pass  # a full or vanished folder: the harness counts the process as one it cannot judge


def base_status(pid, phase):
    """The fields every hook's status file starts with."""
    return {"v": 1, "pid": pid, "ppid": os.getppid(), "phase": phase, "python": sys.version.split()[0],
            # Bytes that are not UTF-8 come as lone surrogates, which JSON readers refuse: kept
            # as \\xNN escapes, so that the status stays readable whatever the program's argv.
            "argv": [os.fsencode(a).decode("utf-8", "backslashreplace")[:200] if isinstance(a, str) else str(a)[:200]
                     for a in list(getattr(sys, "argv", []))[:8]]}


class AfterImport(importlib.abc.MetaPathFinder):
    """Finds the top-level module `name` through the finders after it, and calls `loaded()`
    once the module's own __init__ has run: the hook changes nothing before the program
    imports it, and the library's own submodules are there when it does."""

    def __init__(self, name, loaded):
        self.name = name
        self.loaded = loaded
        self.hooked = False  # the module's __init__ ran under our loader, or it has a loader we cannot wrap
        self.searching = False  # asking the finders after this one: their answer is not ours to wrap again

    def find_spec(self, name, path=None, target=None):
        if name != self.name or self.hooked or self.searching:
            return None
        # Armed when the module runs, not when it is found: a program (transformers, accelerate)
        # often asks importlib.util.find_spec first and throws the spec away; the import after
        # it finds a spec again, which must be wrapped too.
        self.searching = True
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
        finally:
            self.searching = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            self.hooked = spec is not None  # not found: a later sys.path may have it
            return spec
        run_module = spec.loader.exec_module
        if getattr(run_module, "cudatrace_wrapped", False):
            return spec

        def exec_module(module):
            run_module(module)
            if not self.hooked:
                self.hooked = True
                self.loaded()

        exec_module.cudatrace_wrapped = True
        spec.loader.exec_module = exec_module
        return spec


def chain_user_sitecustomize(hook_dir):
    """Runs the sitecustomize the hook's hides (the next on sys.path), as site would have."""
    me = os.path.normcase(hook_dir)
    rest = [p for p in sys.path if os.path.normcase(os.path.abspath(p or os.curdir)) != me]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)

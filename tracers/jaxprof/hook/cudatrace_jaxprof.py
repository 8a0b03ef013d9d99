"""The jaxprof method's half inside the traced Python program (tracers/jaxprof/README.md).

Loaded by the sitecustomize.py beside it, first on PYTHONPATH, at every interpreter start.
It imports nothing heavy and changes nothing until the program itself imports jax; then it
waits for the process's first backend initialization (jax._src.xla_bridge.backends(), which
every first use of a device goes through), starts
jax.profiler.start_trace($CUDATRACE_JAXPROF_DIR/jaxprof.<pid>, create_perfetto_trace=True)
just after it, and stops the trace at exit, which writes plugins/profile/<run>/ there: one
folder per process. Each process also keeps jaxprof.<pid>.status.json, rewritten at each
phase (cudatrace_hook.py), so that the harness can tell a process that never imported jax, or
died before its trace was written, from one that was traced and saw nothing.
"""
import atexit
import os
import sys
import threading
import time

import cudatrace_hook

DIR_ENV = "CUDATRACE_JAXPROF_DIR"
HOOK_DIR = os.path.dirname(os.path.abspath(__file__))

_state = {"owner": None, "dir": None, "tracing": False, "phase": None, "jax": None, "started_ns": None,
          "parent": None, "starting": False, "may_start": True, "start_trace": None}
# Two threads may reach a first backends() at once; one of them starts the trace.
_start_lock = threading.Lock()


def trace_dir(pid):
    return os.path.join(_state["dir"], "jaxprof.%d" % pid)


def _write_status(phase, **fields):
    _state["phase"] = phase
    pid = os.getpid()
    status = cudatrace_hook.base_status(pid, phase)
    status.update({"jax": _state["jax"], "profiling_since_ns": _state["started_ns"]})
    if _state["parent"] is not None:
        status["forked_from"] = _state["parent"]
    status.update(fields)
    cudatrace_hook.replace_json(os.path.join(_state["dir"], "jaxprof.%d.status.json" % pid), status)


def _stop(phase, **fields):
    """Stops the hook's trace, which writes it; `phase` is what the status says once written."""
    if not _state["tracing"] or os.getpid() != _state["owner"]:
        return
    _state["tracing"] = False
    _state["may_start"] = False  # one trace per process: a second would be a second folder's run
    t0 = time.monotonic()
    try:
        import jax.profiler
        jax.profiler.stop_trace()
    except BaseException as e:  # noqa: B902 - a failed export must be said, whatever it was
        _write_status("export_failed", error=repr(e)[:2000], export_s=time.monotonic() - t0, **fields)
        if not isinstance(e, Exception):
            raise  # an interrupt or exit is the program's: it goes on as it would untraced
        return
    _write_status(phase, export_s=time.monotonic() - t0, **fields)


def _stop_at_exit():
    _stop("exported")


def _start_trace():
    if os.getpid() != _state["owner"] or _state["tracing"] or _state["starting"] or not _state["may_start"]:
        return
    if not _start_lock.acquire(blocking=False):
        return
    if _state["tracing"] or not _state["may_start"]:
        _start_lock.release()
        return
    _state["starting"] = True
    try:
        _state["start_trace"](trace_dir(os.getpid()), create_perfetto_trace=True)
        _state["tracing"] = True
    except BaseException as e:  # noqa: B902 - whatever stopped it, the harness must read why
        _state["may_start"] = False  # once: backends() is asked at most of jax's calls
        _write_status("start_failed", error=repr(e)[:2000])
        if not isinstance(e, Exception):
            raise  # an interrupt or exit is the program's: it goes on as it would untraced
        return
    finally:
        _state["starting"] = False
        _start_lock.release()
    _state["started_ns"] = time.time_ns()
    # Registered now, after jax's own import-time handlers: atexit runs last-in first-out,
    # so the trace is written while jax's backends are still whole.
    atexit.register(_stop_at_exit)
    _write_status("profiling")


def _yield_to_program(start_trace):
    """jax.profiler runs one trace at a time: a program that starts its own would get
    "Profile has already been started". The hook's trace is stopped and written there, and
    the program's starts as it would untraced; the status says the hook's trace ended early."""

    def program_start_trace(*args, **kwargs):
        if _state["tracing"]:
            _stop("yielded_to_program")
        _state["may_start"] = False
        return start_trace(*args, **kwargs)

    return program_start_trace


def _replace_everywhere(prefix, attr, old, new):
    # jax's own modules take some functions by name at import (`from ... import backends`):
    # theirs are replaced too, so that every door leads through the hook's.
    for name, module in list(sys.modules.items()):
        if (name == prefix or name.startswith(prefix + ".")) and getattr(module, attr, None) is old:
            setattr(module, attr, new)


def _arm():
    """jax is imported: the trace starts just after the process's first backend
    initialization. Not now: start_trace initializes the backends itself (it asks
    xla_bridge.get_backend()), which starts CUDA and takes most of the GPU's memory, and a
    program that imports jax, then sets jax_platforms, XLA_PYTHON_CLIENT_* or
    CUDA_VISIBLE_DEVICES, calls jax.distributed.initialize() or forks its workers, would run
    otherwise than untraced."""
    import jax
    _state["jax"] = str(getattr(jax, "__version__", "?"))
    from jax._src import profiler as jax_profiler
    from jax._src import xla_bridge
    start_trace = _state["start_trace"] = jax_profiler.start_trace
    _replace_everywhere("jax", "start_trace", start_trace, _yield_to_program(start_trace))
    first_use = xla_bridge.backends
    initialized = getattr(xla_bridge, "_backends", None)
    if initialized:
        _start_trace()
        return

    def backends(*args, **kwargs):
        out = first_use(*args, **kwargs)
        if not _state["tracing"] and not _state["starting"]:
            _start_trace()  # its own get_backend() comes back here, and passes through
        return out

    _replace_everywhere("jax", "backends", first_use, backends)
    if not _state["tracing"]:
        _write_status("armed")


def _jax_imported():
    if os.getpid() == _state["owner"]:
        try:
            _arm()
        except Exception as e:
            _state["may_start"] = False
            _write_status("start_failed", error=repr(e)[:2000])


def _after_fork_in_child():
    # XLA's profiler session does not survive fork (its tracer threads and CUPTI's state stay
    # in the parent), nor do jax's backends: a forked child is not traced, and says so.
    _state["parent"] = _state["owner"]
    _state["owner"] = os.getpid()
    had_trace = _state["tracing"]
    _state["tracing"] = False
    _state["may_start"] = not had_trace
    _write_status("forked", profiler_in_parent=had_trace)


def _status_at_exit():
    if os.getpid() != _state["owner"]:
        return
    if _state["phase"] == "python":
        # jax in sys.modules yet never armed: its loader was one the finder could not wrap.
        _write_status("jax_not_profiled" if "jax" in sys.modules else "ended_without_jax")
    elif _state["phase"] == "armed":
        _write_status("jax_without_backend")


def install():
    out_dir = os.environ.get(DIR_ENV)
    if not out_dir or _state["owner"] is not None:
        return
    _state["owner"] = os.getpid()
    _state["dir"] = out_dir
    _write_status("python")
    atexit.register(_status_at_exit)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
    if "jax" in sys.modules:
        _jax_imported()
    else:
        sys.meta_path.insert(0, cudatrace_hook.AfterImport("jax", _jax_imported))


def chain_user_sitecustomize():
    cudatrace_hook.chain_user_sitecustomize(HOOK_DIR)

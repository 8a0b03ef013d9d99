"""The torchprof method's half inside the traced Python program (tracers/torchprof/README.md).

Loaded by the sitecustomize.py beside it, first on PYTHONPATH, at every interpreter start.
It imports nothing heavy and changes nothing until the program itself imports torch; then
it waits for the process's first CUDA initialization through torch (torch.cuda._lazy_init,
which every first use of CUDA from Python goes through), starts
torch.profiler.profile(activities=[CPU, CUDA]) just before it, and at exit exports its
Chrome trace to $CUDATRACE_TORCHPROF_DIR/torchprof.<pid>.json, one file per process. Each
process also keeps torchprof.<pid>.status.json there, rewritten at each phase, so that the
harness can tell a process that never imported torch, or died before its export, from one
that was traced and saw nothing.
"""
import atexit
import os
import sys
import time

import cudatrace_hook

DIR_ENV = "CUDATRACE_TORCHPROF_DIR"
HOOK_DIR = os.path.dirname(os.path.abspath(__file__))

_state = {"owner": None, "dir": None, "prof": None, "phase": None, "torch": None,
          "started_ns": None, "parent": None, "starting": False, "may_start": True}


def _status_path(pid):
    return os.path.join(_state["dir"], "torchprof.%d.status.json" % pid)


def trace_path(pid):
    return os.path.join(_state["dir"], "torchprof.%d.json" % pid)


def _write_status(phase, **fields):
    _state["phase"] = phase
    pid = os.getpid()
    status = cudatrace_hook.base_status(pid, phase)
    status.update({"torch": _state["torch"], "profiling_since_ns": _state["started_ns"]})
    if _state["parent"] is not None:
        status["forked_from"] = _state["parent"]
    status.update(fields)
    cudatrace_hook.replace_json(_status_path(pid), status)


def _bus_ids():
    # Ordinals are per process (CUDA_VISIBLE_DEVICES); the bus id names the GPU for every
    # process. Asked only where torch has already started CUDA: asking would start it.
    import torch
    out = {}
    if not torch.cuda.is_initialized():
        return out
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        if all(hasattr(p, a) for a in ("pci_domain_id", "pci_bus_id", "pci_device_id")):
            out[str(i)] = "%04x:%02x:%02x.0" % (p.pci_domain_id, p.pci_bus_id, p.pci_device_id)
    return out


def _export_at_exit():
    prof = _state["prof"]
    if prof is None or os.getpid() != _state["owner"]:
        return
    _state["prof"] = None
    # Nothing starts again from here: stop() and the export go through torch.cuda, whose
    # _lazy_init is ours, and a profiler started there cancelled this one's trace ("higher
    # priority synchronous request"): on an H100 with torch 2.11 every trace came out with
    # 64 events, 1 of them a CUDA call, where the same program holds 712 (81 kernels).
    _state["may_start"] = False
    t0 = time.monotonic()
    try:
        prof.stop()
        prof.export_chrome_trace(trace_path(os.getpid()))
    except BaseException as e:  # noqa: B902 - a failed export must be said, whatever it was
        _write_status("export_failed", error=repr(e)[:2000], export_s=time.monotonic() - t0)
        if not isinstance(e, Exception):
            raise  # an interrupt or exit is the program's: it goes on as it would untraced
        return
    devices = {}
    try:
        devices = _bus_ids()
    except Exception:
        pass
    _write_status("exported", export_s=time.monotonic() - t0, devices=devices)


def _start_profiler():
    if os.getpid() != _state["owner"] or _state["prof"] is not None or _state["starting"] or not _state["may_start"]:
        return
    _state["starting"] = True
    try:
        from torch.profiler import ProfilerActivity, profile
        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
        prof.start()
    except BaseException as e:  # noqa: B902 - whatever stopped it, the harness must read why
        _state["may_start"] = False  # once: torch.cuda asks _lazy_init at most of its calls
        _write_status("start_failed", error=repr(e)[:2000])
        if not isinstance(e, Exception):
            raise  # an interrupt or exit is the program's: it goes on as it would untraced
        return
    finally:
        _state["starting"] = False
    _state["prof"] = prof
    _state["started_ns"] = time.time_ns()
    # Registered now, after torch's own import-time handlers: atexit runs last-in first-out,
    # so the export runs while torch is still whole.
    atexit.register(_export_at_exit)
    _write_status("profiling")


def _arm():
    """torch is imported: the profiler starts at the process's first CUDA initialization.
    Not now: starting it asks torch.cuda.is_available(), which starts the CUDA driver, and a
    program that imports torch, sets CUDA_VISIBLE_DEVICES or forks workers, then uses CUDA
    would run otherwise than untraced."""
    import torch
    _state["torch"] = str(getattr(torch, "__version__", "?"))
    cuda = getattr(torch, "cuda", None)
    first_use = getattr(cuda, "_lazy_init", None)
    initialized = getattr(cuda, "is_initialized", None)
    if first_use is None or (initialized is not None and initialized()):
        _start_profiler()
        return

    def lazy_init(*args, **kwargs):
        if _state["prof"] is None:
            _start_profiler()
        return first_use(*args, **kwargs)

    # torch.cuda's own submodules took the function by name when torch was imported
    # (`from . import _lazy_init`): theirs is replaced too.
    for name, module in list(sys.modules.items()):
        if (name == "torch.cuda" or name.startswith("torch.cuda.")) and getattr(module, "_lazy_init", None) is first_use:
            module._lazy_init = lazy_init
    if _state["prof"] is None:
        _write_status("armed")


def _torch_imported():
    """torch's own __init__ has run (before that, torch.profiler cannot be imported)."""
    if os.getpid() == _state["owner"]:
        try:
            _arm()
        except Exception as e:
            _write_status("start_failed", error=repr(e)[:2000])


def _after_fork_in_child():
    # The profiler does not survive fork (Kineto's threads and CUPTI's state stay in the
    # parent): a forked child is not traced, and says so.
    _state["parent"] = _state["owner"]
    _state["owner"] = os.getpid()
    had_profiler = _state["prof"] is not None
    _state["prof"] = None
    # A child of a parent that profiled inherits Kineto's state half alive: nothing starts
    # there (its parent had started CUDA too, which torch refuses in a forked child anyway).
    # A child of a parent that had not may start its own, and is traced where it exits
    # through atexit (multiprocessing's forked workers leave through os._exit: not).
    _state["may_start"] = not had_profiler
    _write_status("forked", profiler_in_parent=had_profiler)


def _status_at_exit():
    if os.getpid() != _state["owner"]:
        return
    if _state["phase"] == "python":
        # torch in sys.modules yet never armed: its loader was one the finder could not wrap.
        _write_status("torch_not_profiled" if "torch" in sys.modules else "ended_without_torch")
    elif _state["phase"] == "armed":
        _write_status("torch_without_cuda")


def install():
    out_dir = os.environ.get(DIR_ENV)
    if not out_dir or _state["owner"] is not None:
        return
    _state["owner"] = os.getpid()
    _state["dir"] = out_dir
    # Kineto says it stopped tracing (its GPU buffers full) only as a WARNING, which torch
    # silences unless KINETO_LOG_LEVEL is set; the harness reads it from the program's stderr.
    os.environ.setdefault("KINETO_LOG_LEVEL", "2")
    _write_status("python")
    atexit.register(_status_at_exit)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
    if "torch" in sys.modules:
        _arm()
    else:
        sys.meta_path.insert(0, cudatrace_hook.AfterImport("torch", _torch_imported))


def chain_user_sitecustomize():
    cudatrace_hook.chain_user_sitecustomize(HOOK_DIR)

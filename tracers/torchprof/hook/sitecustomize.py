# The torchprof method's hook (tracers/torchprof/README.md): the harness puts this folder
# first on PYTHONPATH, so site imports this file at every interpreter start, the program's
# children included. It arms the profiler for when torch is imported, then runs the
# sitecustomize it hides, if there is one, so that a user's or the distribution's own
# keeps working whether or not the hook could be armed.
import sys as _sys

try:
    import cudatrace_torchprof as _cudatrace_torchprof
except Exception as _e:  # the hook must never stop the program from starting
    _cudatrace_torchprof = None
    print("cudatrace torchprof hook: not loaded: %r" % (_e,), file=_sys.stderr)
if _cudatrace_torchprof is not None:
    try:
        _cudatrace_torchprof.install()
    except Exception as _e:
        print("cudatrace torchprof hook: not armed: %r" % (_e,), file=_sys.stderr)
    _cudatrace_torchprof.chain_user_sitecustomize()

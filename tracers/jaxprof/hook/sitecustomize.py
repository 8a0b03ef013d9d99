# The jaxprof method's hook (tracers/jaxprof/README.md): the harness puts this folder first on
# PYTHONPATH, so site imports this file at every interpreter start, the program's children
# included. It arms jax.profiler for when jax is imported, then runs the sitecustomize it
# hides, if there is one, so that a user's or the distribution's own keeps working whether or
# not the hook could be armed.
import sys as _sys

try:
    import cudatrace_jaxprof as _cudatrace_jaxprof
except Exception as _e:  # the hook must never stop the program from starting
    _cudatrace_jaxprof = None
    print("cudatrace jaxprof hook: not loaded: %r" % (_e,), file=_sys.stderr)
if _cudatrace_jaxprof is not None:
    try:
        _cudatrace_jaxprof.install()
    except Exception as _e:
        print("cudatrace jaxprof hook: not armed: %r" % (_e,), file=_sys.stderr)
    _cudatrace_jaxprof.chain_user_sitecustomize()

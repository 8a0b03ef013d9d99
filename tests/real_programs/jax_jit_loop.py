"""JAX: a jitted training step of a small MLP run for a few seconds. XLA replays the step
as a CUDA graph (its command buffers, on by default), loads its kernels with
cuModuleLoadData and runs autotuning kernels first. Command for
`harness ... -- python3 tests/real_programs/jax_jit_loop.py [STEPS]` (default 300).
Start-up ends once the first step has been compiled and run."""
import os

from cudatrace_program import cannot_run, count_argument, need, startup_done, step_done

steps = count_argument(300)
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
jax = need("jax_jit_loop", "jax")
jnp = need("jax_jit_loop", "jax.numpy")
try:
    gpus = jax.devices("gpu")
except RuntimeError as e:
    cannot_run("jax_jit_loop", f"JAX sees no GPU ({e})")


def loss(params, x, y):
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    return jnp.mean((h @ params["w2"] - y) ** 2)


@jax.jit
def step(params, x, y):
    g = jax.grad(loss)(params, x, y)
    return jax.tree_util.tree_map(lambda p, d: p - 0.01 * d, params, g)


k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
params = {"w1": jax.random.normal(k1, (512, 1024)) * 0.05, "b1": jnp.zeros(1024),
          "w2": jax.random.normal(k2, (1024, 16)) * 0.05}
x = jax.random.normal(k3, (256, 512))
y = jnp.ones((256, 16))
for i in range(steps):
    params = step(params, x, y)
    if i == 0:
        jax.block_until_ready(params)
        startup_done("first step compiled and run")
    step_done(lambda: jax.block_until_ready(params))
final = float(loss(params, x, y))
print(f"jax jit loop: {steps} steps, loss {final:.5f}")

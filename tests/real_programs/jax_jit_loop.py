"""JAX: a jitted training step of a small MLP run for a few seconds. XLA replays the step
as a CUDA graph (its command buffers, on by default), loads its kernels with
cuModuleLoadData and runs autotuning kernels first. Command for
`harness ... -- python3 tests/real_programs/jax_jit_loop.py [STEPS]`."""
import os
import sys

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
import jax
import jax.numpy as jnp

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300


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
for _ in range(steps):
    params = step(params, x, y)
final = float(loss(params, x, y))
print(f"jax jit loop: {steps} steps, loss {final:.5f}")

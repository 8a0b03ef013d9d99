"""JAX: XLA compiles the step and loads it through the driver API; its CUDA plugin
dlopens the CUDA libraries it uses from its own wheels. Command for
`harness ... -- python3 tests/real_programs/jax_step.py`."""
import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
import jax
import jax.numpy as jnp


@jax.jit
def step(w, x):
    return w - 0.01 * jax.grad(lambda w: jnp.mean((x @ w) ** 2))(w)


w = jnp.ones((256, 256))
x = jax.random.normal(jax.random.PRNGKey(0), (512, 256))
for _ in range(5):
    w = step(w, x)
w.block_until_ready()
print("jax", jax.devices()[0].platform, float(w.sum()))

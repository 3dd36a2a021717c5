"""Check that a TPU slice shows JAX the devices its shape promises; then optionally hold it.

Runs in every pod of a slice-check JobSet (mounted from the ConfigMap ``slice-check-script`` at
``/checks``). Environment:

  EXPECTED_SLICE_DEVICES   required  JAX devices of one slice (chips x 2 on TPU7x)
  EXPECTED_LOCAL_DEVICES   required  JAX devices of this host (8 on tpu7x-standard-4t)
  HOLD_SECONDS             optional  seconds to keep the slice after a pass (default 0: exit at once)
  NUM_PROCESSES            optional  pods (hosts) in the slice, i.e. the Job's parallelism (default 1)

Multi-process: Kubernetes does not tell a pod how many pods its Job has (an Indexed Job only sets
JOB_COMPLETION_INDEX), so the manifest sets NUM_PROCESSES to the Job's parallelism. When it is
above 1 the script calls ``jax.distributed.initialize()`` without arguments: JAX then finds the
coordinator, process id and process count itself from TPU_WORKER_HOSTNAMES / TPU_WORKER_ID, which
GKE sets in multi-host TPU pods.

Several slices: GKE also gives the pods of a JobSet of several TPU Jobs the multislice variables
(MEGASCALE_*), and JAX then runs every Job as one multislice cluster (jax/_src/clusters/
cloud_tpu_cluster.py multiplies the processes by MEGASCALE_NUM_SLICES; kubernetes-sigs/jobset's
tpu-multislice example sets no variable and sees both slices' devices). So the script counts the
devices of each slice (a TPU device's ``slice_index``; 0 on a device without one), whether the slices
ran as one cluster or each alone.

Output: one JSON line on stdout. Exit status: 0 pass, 1 device-count mismatch, 2 bad environment.

Only the standard library besides jax, and jax is imported in ``__main__`` alone, so the logic is
testable without JAX: ``main()`` takes the jax module, the environment and ``sleep`` as arguments.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Mapping

EXIT_OK = 0
EXIT_MISMATCH = 1
EXIT_BAD_CONFIG = 2


@dataclass(frozen=True)
class Config:
    expected_slice_devices: int
    expected_local_devices: int
    hold_seconds: int
    num_processes: int


def _int_from_env(env: Mapping[str, str], name: str, default: int | None, minimum: int) -> int:
    text = env.get(name, "").strip()
    if not text:
        if default is None:
            raise ValueError(f"{name} is not set")
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name}={text!r} is not an integer") from None
    if value < minimum:
        raise ValueError(f"{name}={value} is below {minimum}")
    return value


def read_config(env: Mapping[str, str]) -> Config:
    """The check's settings from the environment; ValueError names the first bad variable."""
    return Config(
        expected_slice_devices=_int_from_env(env, "EXPECTED_SLICE_DEVICES", None, 1),
        expected_local_devices=_int_from_env(env, "EXPECTED_LOCAL_DEVICES", None, 1),
        hold_seconds=_int_from_env(env, "HOLD_SECONDS", 0, 0),
        num_processes=_int_from_env(env, "NUM_PROCESSES", 1, 1),
    )


def evaluate(
    slice_devices: Mapping[int, int], local_devices: int, expected_slice: int, expected_local: int
) -> tuple[bool, str]:
    """Compare the counts JAX reports (the devices of each slice it sees, by slice index) with the expected ones:
    (ok, one-line message)."""
    problems = [
        f"slice {index} device count {count}, expected {expected_slice}"
        for index, count in sorted(slice_devices.items())
        if count != expected_slice
    ] or ([] if slice_devices else [f"no device, expected {expected_slice} in each slice"])
    if local_devices != expected_local:
        problems.append(f"local device count {local_devices}, expected {expected_local}")
    if problems:
        return False, "; ".join(problems)
    slices = len(slice_devices)
    return True, f"{slices} slice(s) of {expected_slice} devices and {local_devices} local devices as expected"


def main(jax_module: Any, env: Mapping[str, str], sleep: Callable[[float], Any] = time.sleep) -> int:
    """Run the check with the given jax module, environment and sleep; return the exit status."""
    try:
        config = read_config(env)
    except ValueError as error:
        print(f"slice check: bad environment: {error}", file=sys.stderr, flush=True)
        return EXIT_BAD_CONFIG

    if config.num_processes > 1:
        jax_module.distributed.initialize()

    slice_devices = Counter(getattr(device, "slice_index", 0) for device in jax_module.devices())
    local_devices = jax_module.local_device_count()
    ok, message = evaluate(slice_devices, local_devices, config.expected_slice_devices, config.expected_local_devices)
    report = {
        "check": "tpu-slice-devices",
        "ok": ok,
        "message": message,
        "pod": env.get("HOSTNAME", ""),
        "num_processes": config.num_processes,
        "slice_devices": {str(index): count for index, count in sorted(slice_devices.items())},
        "expected_slice_devices": config.expected_slice_devices,
        "local_devices": local_devices,
        "expected_local_devices": config.expected_local_devices,
        "hold_seconds": config.hold_seconds,
    }
    print(json.dumps(report, sort_keys=True), flush=True)

    if not ok:
        print(f"slice check FAILED: {message}", file=sys.stderr, flush=True)
        return EXIT_MISMATCH
    if config.hold_seconds > 0:
        print(f"slice check passed; holding the slice for {config.hold_seconds} s", flush=True)
        sleep(config.hold_seconds)
    return EXIT_OK


if __name__ == "__main__":
    import jax

    sys.exit(main(jax, os.environ))

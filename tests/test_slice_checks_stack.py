"""The slice checks as part of the program: what the dev stack declares, in which order, and the
admission plan that says which checks run together."""

import pytest

from components import stack as stack_config
from components.platform.kueue_objects import PRIORITY_LABEL, QUEUE_LABEL
from components.tpu.admission import AdmissionPlan, SliceWorkload, cubes_needed, never_admitted_problem
from components.tpu.topology import Shape
from components.workloads.slice_checks import config as checks_config
from tests.conftest import pulled, run_stack, stack_values, with_overrides
from tools.render import kubernetes_objects

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
CONFIGMAP = "kubernetes:core/v1:ConfigMap"


def jobsets(run):
    return {o["metadata"]["name"]: o for o in kubernetes_objects(run.registrations) if o["kind"] == "JobSet"}


def dev_config() -> stack_config.StackConfig:
    return stack_config.load(stack_values()).config


def test_dev_stack_runs_each_enabled_check_as_its_block_declares_it(dev_run):
    """Each enabled check of the dev stack's checks block is a JobSet: in the checks' namespace, on the stack's local
    queue (one of its own namespace) at its priority, its slices and the hosts of one slice of its shape."""
    config = dev_config()
    enabled = checks_config.enabled_checks(config.checks, config.tpu)
    assert enabled, "the dev stack runs the checks"
    found = jobsets(dev_run)
    assert set(found) == {check.name for check in enabled.values()}
    namespace = checks_config.checks_namespace(config.checks, config.queues)
    for check in enabled.values():
        jobset = found[check.name]
        labels = jobset["metadata"]["labels"]
        assert jobset["metadata"]["namespace"] == namespace
        assert labels[QUEUE_LABEL] == config.queues.local_queue_name
        assert labels[PRIORITY_LABEL] == config.queues.priority_class(check.priority).name
        (job,) = jobset["spec"]["replicatedJobs"]
        assert job["replicas"] == check.slices
        assert (
            job["template"]["spec"]["parallelism"]
            == Shape.parse(check.shape).chips // config.tpu.machine.chips_per_host
        )
    assert namespace in config.queues.namespaces  # where the stack makes its LocalQueue
    assert dev_run.outputs["sliceCheckJobSets"] == sorted(found)


def test_checks_wait_for_the_slice_controller_the_queue_and_the_script(dev_run):
    script = dev_run.one(CONFIGMAP, "check-script")
    assert script.parent == "slice-checks"
    assert {script.input("metadata.namespace")} == {j["metadata"]["namespace"] for j in jobsets(dev_run).values()}
    assert "check_devices.py" in script.input("data")
    for name in ("subslice-check", "superslice-check"):
        jobset = dev_run.one(JOBSET, name)
        assert jobset.parent == "slice-checks"
        assert {"slice-controller", "kueue-objects", "llm-d-pd-disaggregation", "check-script"} <= set(
            jobset.dependencies
        )
        assert jobset.provider.split("::")[-2] == "gke"


def test_config_sets_hold_time_image_and_priority():
    image, hold, priority = "registry.example/jax-tpu:2026-12-01", 60, "high"
    overrides = {"checks.image": image, "checks.subslicing": {"holdSeconds": hold, "priority": priority}}
    run = run_stack(overrides)
    config = dev_config()
    jobset = jobsets(run)[config.checks.subslicing.name]
    (container,) = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == pulled(image, overrides=overrides)  # through its own pull-through repository
    assert {e["name"]: e["value"] for e in container["env"]}["HOLD_SECONDS"] == str(hold)
    assert jobset["metadata"]["labels"][PRIORITY_LABEL] == config.queues.priority_class(priority).name


def test_switching_a_check_off_removes_it():
    run = run_stack({"checks.superslicing.enabled": False, "serving.enabled": False})
    checks = dev_config().checks
    assert set(jobsets(run)) == {checks.subslicing.name}
    assert not [r for r in run.registrations if r.type == JOBSET and r.name == checks.superslicing.name]
    # the one left fits beside nothing else
    assert run.outputs["admissionPlan"][-1].startswith("all run at the same time: ")


def test_switching_both_off_removes_the_component():
    run = run_stack({"checks": {"subslicing": {"enabled": False}, "superslicing": {"enabled": False}}})
    checks = [r for r in run.registrations if r.parent == "slice-checks" or r.name == "slice-checks"]
    assert not checks
    assert not [r for r in run.registrations if r.type == JOBSET]
    assert "sliceCheckJobSets" not in run.outputs


def test_admission_plan_of_the_dev_stack(dev_run):
    """The plan names every enabled slice workload of the stack's blocks with its slices, shape and priority, counts
    the cubes of the stack's pools, and orders every preemption from the higher priority to the lower."""
    config = dev_config()
    workloads = list(config.admission_plan().workloads)
    plan = dev_run.outputs["admissionPlan"]
    assert workloads, "the dev stack runs slice workloads"
    for line, workload in zip(plan, workloads, strict=False):
        assert line.startswith(f"{workload.key} ({workload.slices} x {workload.shape}, {workload.priority_name})")
    # a cube is 4x4x4 = 64 chips; every pool's nodes hold the machine's chips
    chips = sum(pool.node_count for pool in config.tpu.pools) * config.tpu.machine.chips_per_host
    summary = plan[len(workloads)]
    assert summary.endswith((f"the stack has {chips // 64}", f"of {chips // 64} cube(s)"))
    priorities = {w.key: w.priority for w in workloads}
    for line in plan[len(workloads) + 1 :]:
        higher, lower = line.split(" (")[0].split(" preempts ")
        assert priorities[higher] > priorities[lower], line


def test_admission_plan_of_the_checks_alone(dev_run):
    """Without serving, the plan is the dev stack's less every line that names serving, and its summary."""
    plan = run_stack({"serving.enabled": False}).outputs["admissionPlan"]
    assert not [line for line in plan if "serving" in line]
    named = [line for line in plan if "checks." in line]
    assert named == [line for line in dev_run.outputs["admissionPlan"] if "checks." in line and "serving" not in line]
    assert len(plan) == len(named) + 1


def test_a_third_cube_lets_both_checks_run_together():
    pools = [{"name": f"cube-{i}", "nodeCount": 16} for i in range(3)]  # 16 hosts of 4 chips: one 4x4x4 cube each
    run = run_stack({"tpu.pools": pools, "serving.enabled": False})
    assert run.outputs["admissionPlan"][-1].startswith("all run at the same time: ")
    assert run.outputs["admissionPlan"][-1].endswith(f" of {len(pools)} cube(s)")


# --- The admission model, alone ------------------------------------------------------------


def workload(key, shape, slices, priority=1000):
    return SliceWorkload(key, Shape.parse(shape), slices, f"p{priority}", priority)


@pytest.mark.parametrize(
    "demands, cubes",
    [
        ([("2x2x2", 8)], 1),  # eight 2x2x2 fill one cube exactly
        ([("2x2x2", 9)], 2),
        ([("2x4x4", 1), ("2x2x4", 2)], 1),  # 32 + 2 x 16 chips share a cube
        ([("2x2x1", 1), ("4x4x4", 1)], 2),  # a super-slice never shares its cube
        ([("4x4x8", 1), ("4x4x4", 2)], 4),
    ],
)
def test_cubes_needed(demands, cubes):
    assert cubes_needed([workload(f"w{i}", shape, n) for i, (shape, n) in enumerate(demands)]) == cubes


def test_a_workload_larger_than_the_capacity_is_never_admitted():
    assert never_admitted_problem(workload("w", "4x4x8", 1), 2) is None
    problem = never_admitted_problem(workload("w", "4x4x8", 1), 1)
    assert (
        problem
        == "1 x 4x4x8 (128 chips) needs 2 cube(s) of 4x4x4 at once; the stack has 1 (64 chips), so Kueue would never admit it"
    )


def test_equal_priorities_queue_instead_of_preempting():
    plan = AdmissionPlan(1, (workload("a", "4x4x4", 1, 500), workload("b", "2x2x2", 1, 500)))
    assert "not all at once: together they need 2 cube(s), the stack has 1" in plan.lines()
    assert plan.lines()[-1] == "a and b queue behind each other (equal priority 500)"


def test_higher_priority_is_named_first_whatever_the_order():
    plan = AdmissionPlan(1, (workload("low", "4x4x4", 1, 1), workload("high", "2x2x2", 1, 9)))
    assert plan.lines()[-1] == "high preempts low (priority 9 > 1)"


def test_an_empty_plan_says_so():
    assert AdmissionPlan(2, ()).lines() == ["no slice workloads enabled"]


@pytest.mark.parametrize("pools", [2, 3, 4, 5])  # one cube holds no 4x4x8
def test_capacity_counts_follow_the_pools(pools):
    """nodes = pools x nodes per pool; chips = nodes x chips per host; cubes = chips / 64; slices of each shape:
    a sub-slice packs into the chips, a super-slice takes whole cubes."""
    per_pool = 16
    raw = with_overrides(
        stack_values(), {"tpu.pools": [{"name": f"c-{i}", "nodeCount": per_pool} for i in range(pools)]}
    )
    config = stack_config.load(raw).config
    tpu = config.tpu
    nodes = pools * per_pool
    chips = nodes * tpu.machine.chips_per_host
    assert (len(tpu.pools), tpu.total_nodes, tpu.total_chips, tpu.cubes) == (pools, nodes, chips, chips // 64)
    fits = ", ".join(
        f"{chips // shape.chips if shape.chips < 64 else (chips // 64) // (shape.chips // 64)} x {shape}"
        for shape in tpu.shapes
    )
    # and the report says so
    head = f"{pools} pool(s) of {tpu.machine_type}: {nodes} nodes, {chips} chips, {chips // 64} cube(s) of 4x4x4"
    assert tpu.capacity_lines() == [head, f"slices that fit at once: {fits}"]


def test_a_check_change_replaces_its_jobset_and_the_old_run_goes_first(dev_run):
    """A JobSet's spec is immutable and Kueue refuses a new queue label: both replace, delete first."""
    changed = run_stack({"checks.superslicing.holdSeconds": 60, "queues.localQueueName": "checks-lq"})
    for name in ("subslice-check", "superslice-check"):
        jobset = changed.one(JOBSET, name)
        assert jobset.options["replaceOnChanges"] == ["metadata.labels", "spec"]
        assert jobset.options["deleteBeforeReplace"] is True
        assert jobset.input("metadata.labels") != dev_run.one(JOBSET, name).input("metadata.labels")


def test_the_structured_plan_says_what_the_lines_say(dev_run):
    """expectations() against the dev stack's lines: every 'preempts' line is a pair of the structured form and back."""
    plan = stack_config.load(stack_values("dev")).config.admission_plan()
    assert plan.lines() == dev_run.outputs["admissionPlan"]
    expectations = plan.expectations()
    said = {(line.split(" preempts ")[0], line.split(" preempts ")[1].split(" (")[0]) for line in plan.lines()
            if " preempts " in line}  # fmt: skip
    structured = {(key, lower) for key, e in expectations.items() for lower in e.preempts}
    assert said == structured
    assert {(hi, key) for key, e in expectations.items() for hi in e.preempted_by} == structured
    # what the plan runs fits, and what it leaves waiting would not fit beside what runs above it
    running = [w for w in plan.workloads if expectations[w.key].runs]
    assert cubes_needed(running) <= plan.cubes
    for waiting in (w for w in plan.workloads if not expectations[w.key].runs):
        above = [w for w in running if w.priority >= waiting.priority]
        assert cubes_needed([*above, waiting]) > plan.cubes, waiting.key


def test_the_structured_plan_keeps_the_earlier_of_equal_priorities_running():
    plan = AdmissionPlan(1, (workload("a", "4x4x4", 1, 500), workload("b", "2x2x2", 1, 500)))
    expectations = plan.expectations()
    assert expectations["a"].runs and not expectations["b"].runs
    assert expectations["b"].waits_behind == ("a",) and expectations["a"].waits_behind == ()
    assert not expectations["a"].preempts and not expectations["b"].preempted_by


def test_the_structured_plan_runs_everything_that_fits():
    plan = AdmissionPlan(2, (workload("a", "4x4x4", 1, 1), workload("b", "2x2x2", 2, 9)))
    assert all(e.runs and not e.preempts and not e.preempted_by for e in plan.expectations().values())

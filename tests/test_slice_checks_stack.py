"""The slice checks as part of the program: what the dev stack declares, in which order, and the
admission plan that says which checks run together."""

import pytest

from components import stack as stack_config
from components.tpu.admission import AdmissionPlan, SliceWorkload, cubes_needed, never_admitted_problem
from components.tpu.topology import Shape
from tests.conftest import pulled, run_stack, stack_values, with_overrides
from tools.render import kubernetes_objects

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
CONFIGMAP = "kubernetes:core/v1:ConfigMap"


def jobsets(run):
    return {o["metadata"]["name"]: o for o in kubernetes_objects(run.registrations) if o["kind"] == "JobSet"}


def test_dev_stack_runs_both_checks_in_the_workload_namespace(dev_run):
    found = jobsets(dev_run)
    assert sorted(found) == ["subslice-check", "superslice-check"]
    for jobset in found.values():
        assert jobset["metadata"]["namespace"] == "llm-d-pd-disaggregation"
        assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "lq"
    assert found["subslice-check"]["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "low-priority-1000"
    assert found["superslice-check"]["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "medium-priority-2000"
    (sub_job,) = found["subslice-check"]["spec"]["replicatedJobs"]
    (super_job,) = found["superslice-check"]["spec"]["replicatedJobs"]
    assert (sub_job["replicas"], sub_job["template"]["spec"]["parallelism"]) == (6, 2)
    assert (super_job["replicas"], super_job["template"]["spec"]["parallelism"]) == (1, 32)
    assert dev_run.outputs["sliceCheckJobSets"] == ["subslice-check", "superslice-check"]


def test_checks_wait_for_the_slice_controller_the_queue_and_the_script(dev_run):
    script = dev_run.one(CONFIGMAP, "check-script")
    assert script.parent == "slice-checks"
    assert script.input("metadata.namespace") == "llm-d-pd-disaggregation"
    assert "check_devices.py" in script.input("data")
    for name in ("subslice-check", "superslice-check"):
        jobset = dev_run.one(JOBSET, name)
        assert jobset.parent == "slice-checks"
        assert {"slice-controller", "kueue-objects", "llm-d-pd-disaggregation", "check-script"} <= set(
            jobset.dependencies
        )
        assert jobset.provider.split("::")[-2] == "gke"


def test_config_sets_hold_time_image_and_priority():
    image = "registry.example/jax-tpu:2026-12-01"
    overrides = {"checks.image": image, "checks.subslicing": {"holdSeconds": 60, "priority": "high"}}
    run = run_stack(overrides)
    jobset = jobsets(run)["subslice-check"]
    (container,) = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == pulled(image, overrides=overrides)  # through its own pull-through repository
    assert {e["name"]: e["value"] for e in container["env"]}["HOLD_SECONDS"] == "60"
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "high-priority-3000"


def test_switching_a_check_off_removes_it():
    run = run_stack({"checks.superslicing.enabled": False, "serving.enabled": False})
    assert sorted(jobsets(run)) == ["subslice-check"]
    assert not [r for r in run.registrations if r.type == JOBSET and r.name == "superslice-check"]
    assert run.outputs["admissionPlan"][-1] == "all run at the same time: 1 of 2 cube(s)"


def test_switching_both_off_removes_the_component():
    run = run_stack({"checks": {"subslicing": {"enabled": False}, "superslicing": {"enabled": False}}})
    checks = [r for r in run.registrations if r.parent == "slice-checks" or r.name == "slice-checks"]
    assert not checks
    assert not [r for r in run.registrations if r.type == JOBSET]
    assert "sliceCheckJobSets" not in run.outputs


def test_admission_plan_of_the_dev_stack(dev_run):
    assert dev_run.outputs["admissionPlan"] == [
        "serving.prefill (4 x 2x2x2, high-priority-3000): 1 cube(s) alone",
        "serving.decode (4 x 2x2x2, high-priority-3000): 1 cube(s) alone",
        "checks.subslicing (6 x 2x2x2, low-priority-1000): 1 cube(s) alone",
        "checks.superslicing (1 x 4x4x8, medium-priority-2000): 2 cube(s) alone",
        "not all at once: together they need 4 cube(s), the stack has 2",
        "serving.prefill preempts checks.superslicing (priority 3000 > 2000)",
        "serving.decode preempts checks.superslicing (priority 3000 > 2000)",
        "checks.superslicing preempts checks.subslicing (priority 2000 > 1000)",
    ]


def test_admission_plan_of_the_checks_alone():
    run = run_stack({"serving.enabled": False})
    assert run.outputs["admissionPlan"] == [
        "checks.subslicing (6 x 2x2x2, low-priority-1000): 1 cube(s) alone",
        "checks.superslicing (1 x 4x4x8, medium-priority-2000): 2 cube(s) alone",
        "not all at once: together they need 3 cube(s), the stack has 2",
        "checks.superslicing preempts checks.subslicing (priority 2000 > 1000)",
    ]


def test_a_third_cube_lets_both_checks_run_together():
    run = run_stack({"tpu.pools": [{"name": f"cube-{i}", "nodeCount": 16} for i in range(3)], "serving.enabled": False})
    assert run.outputs["admissionPlan"][-1] == "all run at the same time: 3 of 3 cube(s)"


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
    assert not plan.all_fit
    assert plan.lines()[-1] == "a and b queue behind each other (equal priority 500)"


def test_higher_priority_is_named_first_whatever_the_order():
    plan = AdmissionPlan(1, (workload("low", "4x4x4", 1, 1), workload("high", "2x2x2", 1, 9)))
    assert plan.lines()[-1] == "high preempts low (priority 9 > 1)"


def test_an_empty_plan_says_so():
    assert AdmissionPlan(2, ()).lines() == ["no slice workloads enabled"]


@pytest.mark.parametrize(
    "pools, expected",
    [
        (
            2,
            [
                "2 pool(s) of tpu7x-standard-4t: 32 nodes, 128 chips, 2 cube(s) of 4x4x4",
                "slices that fit at once: 16 x 2x2x2, 1 x 4x4x8",
            ],
        ),
        (
            3,
            [
                "3 pool(s) of tpu7x-standard-4t: 48 nodes, 192 chips, 3 cube(s) of 4x4x4",
                "slices that fit at once: 24 x 2x2x2, 1 x 4x4x8",
            ],
        ),
        (
            4,
            [
                "4 pool(s) of tpu7x-standard-4t: 64 nodes, 256 chips, 4 cube(s) of 4x4x4",
                "slices that fit at once: 32 x 2x2x2, 2 x 4x4x8",
            ],
        ),
    ],
)
def test_capacity_report_follows_the_number_of_cubes(pools, expected):
    raw = with_overrides(stack_values(), {"tpu.pools": [{"name": f"cube-{i}", "nodeCount": 16} for i in range(pools)]})
    assert stack_config.parse(raw).tpu.capacity_report().lines() == expected


def test_a_check_change_replaces_its_jobset_and_the_old_run_goes_first(dev_run):
    """A JobSet's spec is immutable and Kueue refuses a new queue label: both replace, delete first."""
    changed = run_stack({"checks.superslicing.holdSeconds": 60, "queues.localQueueName": "checks-lq"})
    for name in ("subslice-check", "superslice-check"):
        jobset = changed.one(JOBSET, name)
        assert jobset.options["replaceOnChanges"] == ["metadata.labels", "spec"]
        assert jobset.options["deleteBeforeReplace"] is True
        assert jobset.input("metadata.labels") != dev_run.one(JOBSET, name).input("metadata.labels")

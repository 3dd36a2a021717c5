"""The CIS GKE Benchmark registry (policy/cis.yaml): its shape, every policy rule and preview key it names, and the
table of docs/cis-benchmark.md generated from it.

Every control of the benchmark's sections 4 and 5 (and one row for sections 1 to 3) appears once, with
a status and what holds it. A policy rule named exists in the pack and fires on a broken copy of the
render (tests/test_policy_rules.py) with a message citing the control; a preview key named is refused
on the production stack when turned off. The checkov checks named are run in
tests/test_security_checkov.py.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from policy import namespaces, rbac, service_accounts
from policy.cis import BENCHMARK, CONTROLS, HOLDING, IN_PRODUCTION, NUMBERS, STATUSES, Control, controls_held_by
from policy.pack import build_policies
from tests.cis_benchmark import production_stacks
from tests.conftest import assert_bad_input, run_stack
from tests.test_policy_rules import BROKEN, STACKS
from tools import cis_table
from tools.render import kubernetes_objects

ROWS = CONTROLS
# The value that turns each production-required key off.
PREVIEW_OFF: dict[str, Any] = {
    "cluster.secretsEncryptionKey": "",
    "network.flowLogs.enabled": False,
    "cluster.privateNodes": False,
    "cluster.controlPlane.ipEndpoint": "public",
    "cluster.bootDiskEncryptionKey": "",
    "tpu.secureBoot": False,
    "cluster.binaryAuthorization": "DISABLED",
    "cluster.rbacSecurityGroup": "",
    "cluster.intranodeVisibility": False,
    # A token in the stack's config is the Kubernetes Secret a production stack must not have (4.4.2).
    "serving.hfToken": "hf_exampleTokenOfAKubernetesSecret",
    "nodeAuditLogging.enabled": False,
}


def test_the_security_page_names_the_benchmark_and_shows_the_registrys_table() -> None:
    page = cis_table.PAGE.read_text()
    assert f"**{BENCHMARK}**" in page
    assert cis_table.page_with_table(page) == page, "the CIS table of docs/cis-benchmark.md is stale: run `make docs`"


def test_every_control_appears_once_in_the_benchmark_order() -> None:
    assert [r.number for r in ROWS] == list(NUMBERS)


@pytest.mark.parametrize("row", ROWS, ids=[r.number for r in ROWS])
def test_every_row_says_how_it_is_held_or_why_not(row: Control) -> None:
    assert row.status in STATUSES, f"{row.number}: status {row.status!r} is none of {STATUSES}"
    assert row.recommendation
    if row.status in HOLDING:
        assert row.held_by, f"{row.number} is {row.status} but names nothing that holds it"
    else:
        assert not row.held_by, f"{row.number} is {row.status}: it cannot be held by {row.held_by}"
    if row.status in ("unchecked", "n/a"):
        assert not row.not_yet, f"{row.number} is {row.status}: nothing should hold it later"
    if row.status in IN_PRODUCTION:
        # Only the preview refuses a production stack without it: the other stacks may leave it off.
        assert any(item.startswith("preview:") for item in row.held_by), (
            f"{row.number} is {row.status}: name the preview key that refuses it turned off"
        )
        assert not row.not_yet, f"{row.number} is {row.status}: what else would hold it belongs in its note"
    if row.status != "held":
        assert len(row.note) > 30, (
            f"{row.number} is {row.status}: the note must say why (held in production: what the other stacks do)"
        )
    for item in (*row.held_by, *row.not_yet):
        assert item.startswith(("CKV_", "CKV2_", "policy:", "preview:")), f"{row.number}: {item!r}"
    assert all(item.startswith(("CKV_", "CKV2_")) for item in row.not_yet), row


def test_one_of_the_tests_stacks_is_a_production_stack() -> None:
    """Rows held in production are checked on these stacks: without one, they would be checked nowhere."""
    assert production_stacks() == ["prod"]


def named(prefix: str) -> list[tuple[str, str]]:
    return [(row.number, item) for row in ROWS for item in row.held_by if item.startswith(prefix)]


def test_every_policy_names_in_its_description_the_controls_it_holds() -> None:
    """What the CLI shows of each policy (GetAnalyzerInfo) says which controls the registry gives it."""
    for policy in build_policies():
        controls = controls_held_by(f"policy:{policy.name}")
        assert (
            policy.description.endswith(f"(CIS GKE {', '.join(controls)}).")
            if controls
            else "CIS" not in policy.description
        )


@pytest.mark.parametrize("control, item", named("policy:"))
def test_every_policy_rule_named_is_in_the_pack_and_fires_on_a_broken_copy(control: str, item: str) -> None:
    rule = item.removeprefix("policy:")
    assert rule in {p.name for p in build_policies()}, f"{control}: the pack has no rule {rule}"
    cases = [case for case in BROKEN if case[0] == rule]
    assert cases, f"{control}: tests/test_policy_rules.py breaks no copy for {rule}"
    # A rule whose messages cite the benchmark is broken once for each control it is named for.
    cited = {case[5] for case in cases if re.fullmatch(r"\d+\.\d+\.\d+", case[5])}
    if cited:
        assert control in cited, f"{control}: no broken copy of {rule} shows a message citing it (only {cited})"


def test_every_control_a_policy_rule_cites_is_one_the_registry_gives_it() -> None:
    """The other way round: a broken copy whose message cites a control shows a rule the registry must name for it."""
    cited = {(case[0], case[5]) for case in BROKEN if re.fullmatch(r"\d+\.\d+\.\d+", case[5])}
    missing = sorted((rule, control) for rule, control in cited if control not in controls_held_by(f"policy:{rule}"))
    assert not missing, f"policy/cis.yaml does not name these rules for the controls their messages cite: {missing}"


@pytest.mark.parametrize("control, item", named("preview:"))
def test_every_preview_key_named_is_refused_on_the_production_stack(control: str, item: str) -> None:
    key = item.removeprefix("preview:")
    assert key in PREVIEW_OFF, f"{control}: say in PREVIEW_OFF how {key} is turned off"
    assert_bad_input({key: PREVIEW_OFF[key]}, key, f"(CIS GKE {control})", stack="prod")


def test_every_production_key_of_the_table_is_named_in_it() -> None:
    assert {key for _, item in named("preview:") for key in [item.removeprefix("preview:")]} == set(PREVIEW_OFF)


@pytest.mark.parametrize("stack", STACKS)
def test_the_rbac_rules_pass_on_every_object_of_a_stack_and_of_its_local_chart(stack: str) -> None:
    """The pack sees the program's own objects; the slice controller chart's are rendered here too."""
    objects = kubernetes_objects(run_stack(stack=stack).registrations)
    bindings = [o for o in objects if o["kind"] in rbac.BINDING_KINDS]
    roles = [o for o in objects if o["kind"] in rbac.ROLE_KINDS]
    problems = [p for o in bindings for p in rbac.object_problems(o["kind"], o["metadata"]["name"], o)]
    problems += [p for o in roles for p in rbac.role_object_problems(o["kind"], o["metadata"]["name"], o)]
    assert problems == []
    if stack != "saxml":
        chart = [o for o in bindings + roles if o["metadata"]["name"].startswith("slice-controller")]
        assert {o["kind"] for o in chart} == {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}, chart


def _resource_type(obj: dict[str, Any]) -> str:
    """The Kubernetes provider's type token of an object: ``apps/v1`` ``Deployment`` -> kubernetes:apps/v1:Deployment."""
    api_version = obj["apiVersion"] if "/" in obj["apiVersion"] else f"core/{obj['apiVersion']}"
    return f"kubernetes:{api_version}:{obj['kind']}"


@pytest.mark.parametrize("stack", STACKS)
def test_the_pod_and_namespace_rules_pass_on_every_object_of_a_stack_and_of_its_local_chart(stack: str) -> None:
    """4.1.4 and 4.2.1 on the render, the slice controller chart's Deployment included (the pack sees its values)."""
    objects = kubernetes_objects(run_stack(stack=stack).registrations)
    problems = [
        problem
        for o in objects
        for rule in (service_accounts.service_account_problems, namespaces.pod_security_problems)
        for problem in rule(_resource_type(o), o["metadata"]["name"], o)
    ]
    assert problems == []
    if stack != "saxml":
        (manager,) = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"].startswith("slice-")]
        assert service_accounts.service_account_problems(_resource_type(manager), "manager", manager) == []
        del manager["spec"]["template"]["spec"]["serviceAccountName"]
        (problem,) = service_accounts.service_account_problems(_resource_type(manager), "manager", manager)
        assert "(CIS GKE 4.1.4)" in problem


def test_the_pin_scanner_exempts_exactly_the_control_numbers() -> None:
    """tests/pins.py takes a control number for a version unless its pattern says otherwise."""
    from tests.pins import CIS_GKE_CONTROL

    numbered = [c for c in NUMBERS if c != "1-3"]
    assert all(re.fullmatch(CIS_GKE_CONTROL, c) for c in numbered)
    assert not any(re.fullmatch(CIS_GKE_CONTROL, v) for v in ("4.34.2", "5.0.0", "4.1.11", "5.11.1"))

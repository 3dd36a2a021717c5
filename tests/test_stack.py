"""The typed stack config: reference defaults, and every bad value caught before any resource."""

import importlib

import pytest
import yaml

from components import stack as stack_config
from components.config_base import CREDENTIAL_SHOWN, ConfigError, Problem, redacted
from tests.conftest import PROJECT_ROOT, assert_bad_input, run_stack, stack_values, with_overrides

MINIMAL = {"project": "my-tpu-project", "tpu": {"reservation": {"name": "res", "block": "block-0"}}}


def test_defaults_are_the_reference_deployment():
    config = stack_config.load(MINIMAL).config
    assert config.region == "us-central1"
    assert (config.network.prefix, config.network.mtu) == ("qwen-serving", 8896)
    assert (config.network.node_cidr, config.network.proxy_only_cidr) == ("10.10.0.0/18", "172.16.0.0/26")
    assert (config.cluster.name, config.cluster.release_channel) == ("qwen-serving-cluster", "RAPID")
    assert config.cluster.system_pool.machine_type == "n2-standard-32"
    assert config.cluster.system_pool.nodes_per_zone == 1
    assert (config.tpu.zone, config.tpu.machine_type) == ("us-central1-ai1a", "tpu7x-standard-4t")
    assert [(p.name, p.node_count, p.topology) for p in config.tpu.pools] == [
        ("tpu7-pool-1", 16, "4x4x4"),
        ("tpu7-pool-2", 16, "4x4x4"),
    ]
    assert config.tpu.workload_policy_name == "superslice-policy"
    assert (config.tpu.total_chips, config.tpu.cubes) == (128, 2)


def test_dev_stack_is_the_reference_deployment():
    config = stack_config.load(stack_values("dev")).config
    assert config.cluster.deletion_protection is False
    reservation = config.tpu.reservation
    # the pools take the reservation's block by its path, as GKE's reservation affinity names it
    assert config.tpu.reservation_path(config.tpu.pools[0], config.project) == (
        f"projects/{config.project}/reservations/{reservation.name}/reservationBlocks/{reservation.block}"
    )
    assert config.tpu.zone_is_ai_zone(config.region)


# (override of the dev stack, config key named in the error, fragment of the message)
BAD_INPUTS = [
    pytest.param({"project": "My_Project"}, "project", "not a project ID", id="project-id-bad"),
    pytest.param({"region": "us-central\u0661"}, "region", "not a region name", id="region-non-ascii-digit"),
    pytest.param({"tpu.zoen": "us-central1-a"}, "tpu.zoen", "did you mean 'zone'", id="misspelled-key"),
]


@pytest.mark.parametrize("override, key, fragment", BAD_INPUTS)
def test_bad_input_names_its_key_and_registers_nothing(override, key, fragment):
    assert_bad_input(override, key, fragment)


def test_every_problem_is_reported_in_one_error():
    raw = with_overrides(
        stack_values("dev"),
        {
            "network.mtu": 9000,
            "tpu.zone": "europe-west4-a",
            "cluster.version": "1.30.0-gke.1",
            "tpu.reservation": {},
            # required settings of a declared form: each failed one stands in by its example for the rules across
            "project": "My_Project",
            "queues.namespaces": ["Serving_NS"],
        },
    )
    with pytest.raises(ConfigError) as raised:
        stack_config.load(raw)
    keys = {p.key for p in raised.value.problems}
    across = {"tpu.zone", "cluster.version", "tpu.reservation.name", "tpu.reservation.block"}  # rules across settings
    assert {"network.mtu", "project", "queues.namespaces[0]", *across} <= keys
    message = str(raised.value)
    assert message.count("\n  - ") == len(raised.value.problems)
    assert "network.mtu: 9000 is outside 1300-8896 (set a number within 1300-8896)" in message


def test_a_value_that_fails_to_parse_gets_no_follow_on_complaints():
    with pytest.raises(ConfigError) as raised:
        stack_config.load(
            with_overrides(
                MINIMAL, {"tpu.pools": [{"name": "p", "nodeCount": "sixteen"}, {"name": "q", "nodeCount": 16}]}
            )
        )
    assert [p.key for p in raised.value.problems] == ["tpu.pools[0].nodeCount"]


@pytest.mark.parametrize(
    "override",
    [
        pytest.param(
            {
                "tpu.sliceShapes": ["4x4x8"],
                "cluster.version": "1.35.2-gke.1842000",
                "checks.subslicing.enabled": False,
                "serving.enabled": False,
            },
            id="super-slicing-floor-exactly",
        ),
        pytest.param(
            {
                "tpu.pools": [{"name": "only", "nodeCount": 16, "subBlock": "sub-block-3"}],
                "tpu.sliceShapes": ["2x2x1"],
                "checks.subslicing.shape": "2x2x1",
                "checks.superslicing.enabled": False,
                "serving.enabled": False,
            },
            id="one-cube-with-sub-block",
        ),
        pytest.param({"network.proxyOnlyCidr": "172.16.0.0/23"}, id="larger-proxy-only-range"),
        pytest.param({"network.mtu": "1460"}, id="integer-given-as-text"),
        pytest.param(
            {
                "cluster.maintenanceWindow": {"start": "2026-01-03T04:00:00Z", "end": "2026-01-03T12:00:00Z"},
                "cluster.maintenanceExclusions": [
                    {
                        "name": "launch",
                        "start": "2026-12-01T00:00:00Z",
                        "end": "2026-12-20T00:00:00Z",
                        "scope": "NO_UPGRADES",
                    }
                ],
            },
            id="maintenance-window-and-exclusion",
        ),
    ],
)
def test_good_variations_parse(override):
    stack_config.load(with_overrides(stack_values("dev"), override))


def test_secret_values_are_never_echoed():
    """A secret setting's value of the wrong type is not shown (nor does it look like a credential to redact)."""
    with pytest.raises(ConfigError) as raised:
        stack_config.load(with_overrides(MINIMAL, {"cluster.existing.kubeconfig": ["abcdefSECRET"]}))
    assert [p.key for p in raised.value.problems] == ["cluster.existing.kubeconfig"]
    assert "abcdefSECRET" not in str(raised.value)


def test_structured_config_that_is_not_json_is_reported():
    with pytest.raises(ConfigError) as raised:
        stack_config.load_pulumi_values(
            {"tpu-dynamic-slicing:project": "my-tpu-project", "tpu-dynamic-slicing:tpu": "{not json"}, ()
        )
    assert any(p.key == "tpu" for p in raised.value.problems)


def test_a_partial_object_keeps_the_defaults_of_the_keys_it_leaves_out():
    config = stack_config.load(
        with_overrides(
            MINIMAL, {"checks": {"subslicing": {"enabled": False}}, "platform": {"kueue": {"version": "0.17.5"}}}
        )
    ).config
    assert config.checks.subslicing.enabled is False
    assert (config.checks.subslicing.name, config.checks.subslicing.shape, config.checks.subslicing.slices) == (
        "subslice-check",
        "2x2x2",
        6,
    )
    assert config.checks.superslicing.enabled is True
    assert (config.platform.kueue.chart, config.platform.kueue.version) == (
        "oci://registry.k8s.io/kueue/charts/kueue",
        "0.17.5",
    )


# --- One way from a block to objects ---------------------------------------------------------


@pytest.mark.parametrize(
    "stack, builder, calls",
    [
        ("dev", "components.workloads.serving.objects:leaderworkerset", 2),  # prefill and decode, once each
        ("dev", "components.workloads.slice_checks.objects:slice_check_jobset", 2),
        ("dev", "components.platform.kueue_objects:queue_objects", 1),
        ("saxml", "components.workloads.saxml.objects:model_server_jobset", 1),
    ],
)
def test_each_manifest_is_built_once_per_run(monkeypatch, stack, builder, calls):
    """Validation (the rules on the built LeaderWorkerSets) and the components share one build."""
    module_name, name = builder.split(":")
    module = importlib.import_module(module_name)
    original, seen = getattr(module, name), []

    def counting(*args, **kwargs):
        seen.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counting)
    run_stack(stack=stack)
    assert len(seen) == calls


def _secure_paths(value: object, path: str) -> list[str]:
    if isinstance(value, dict):
        if "secure" in value:
            return [path]
        return [p for key, item in value.items() for p in _secure_paths(item, f"{path}.{key}")]
    if isinstance(value, list):
        return [p for index, item in enumerate(value) for p in _secure_paths(item, f"{path}[{index}]")]
    return []


@pytest.mark.parametrize("path", sorted(PROJECT_ROOT.glob("Pulumi.*.yaml")), ids=lambda p: p.name)
def test_no_committed_stack_file_carries_a_value_only_its_owner_can_decrypt(path):
    """The CLI decrypts every secure: value before the program starts and refuses a stack it cannot: a committed
    stack file with one fails preview, up and destroy for everyone without that stack's secrets provider."""
    document = yaml.safe_load(path.read_text())
    assert _secure_paths(document.get("config") or {}, "config") == []
    assert not {"encryptionsalt", "secretsprovider", "encryptedkey"} & set(document), "a stack's own secrets setup"


# One of each credential shape CREDENTIAL_PATTERNS knows, made up here (none is a real credential).
CREDENTIALS = {
    "hugging-face-token": "hf_" + "QwErTyUiOpAsDfGhJkLzXcVbNmQwErTyUi",
    "google-api-key": "AIza" + "Sy" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "private-key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n",
    "github-token": "ghp_" + "0123456789abcdefghijABCDEFGHIJklmnopqr",
    "oauth-access-token": "ya29." + "a0AfB_byC1234567890abcdefghij",
    "aws-access-key": "AKIA" + "IOSFODNN7EXAMPLE",
}
# Where a user might paste one: a string setting checked for its form, an integer setting, a list item, a setting
# that takes a secret's path (not the secret), an unknown key named for a password (any value under it is one).
PASTED_UNDER = {
    "tpu.reservation.name": "tpu.reservation.name",
    "serving.prefill.replicas": "serving.prefill.replicas",
    "tpu.sliceShapes": "tpu.sliceShapes[0]",
    "serving.hfTokenSecretVersion": "serving.hfTokenSecretVersion",
}


@pytest.mark.parametrize("kind", CREDENTIALS)
@pytest.mark.parametrize("setting", PASTED_UNDER)
def test_no_message_echoes_a_credential_whatever_key_it_was_put_under(kind, setting):
    """A credential typed under the wrong key is refused under that key, and the message shows it as redacted; the
    same key with a value of the right form passes again."""
    credential = CREDENTIALS[kind]
    value = [credential] if setting == "tpu.sliceShapes" else credential
    with pytest.raises(ConfigError) as raised:
        stack_config.load(with_overrides(stack_values("dev"), {setting: value}))
    message = str(raised.value)
    assert any(p.key == PASTED_UNDER[setting] for p in raised.value.problems), message
    for part in credential.splitlines():
        assert part.strip("-") not in message, message
    assert CREDENTIAL_SHOWN in message
    stack_config.load(stack_values("dev"))  # the dev stack's own value there passes


@pytest.mark.parametrize("key", ["password", "dockerHubPassword", "apiKey", "accessToken", "credentials"])
def test_a_value_under_a_key_named_for_a_credential_is_never_echoed(key):
    """A password has no shape of its own: any value under a key named for a credential is one, known setting or
    not, while the same value under another key is shown."""
    raw = {"images": {key: "correct horse battery staple", "mirror": "correct horse battery staple"}}
    echoed = Problem(f"images.{key}", "'correct horse battery staple' is not valid", "set a valid one")
    (shown,) = redacted([echoed], raw, set())
    assert "correct horse" not in str(shown) and CREDENTIAL_SHOWN in shown.what
    other = {"images": {"mirror": "correct horse battery staple"}}
    assert redacted([echoed], other, set()) == [echoed]


def test_no_message_echoes_a_value_inside_a_secret_key():
    """Pulumi keeps secrecy per top-level key: nothing under a secret key is echoed, whichever leaf was encrypted."""
    raw = with_overrides(
        stack_values("dev"),
        {"cluster.version": "9.9-leakme", "cluster.name": "Leak_Me_Too", "serving.hfToken": 12345678},
    )
    with pytest.raises(ConfigError) as raised:
        stack_config.load(raw, secret_keys={"cluster", "serving"})
    message = str(raised.value)
    for key in ("cluster.version", "cluster.name", "serving.hfToken"):
        assert any(p.key == key for p in raised.value.problems), message
    assert "leakme" not in message and "Leak_Me_Too" not in message and "12345678" not in message
    assert "[secret]" in message
    # Outside a secret key the value is named, so the reader sees what to fix.
    with pytest.raises(ConfigError) as plain:
        stack_config.load(with_overrides(stack_values("dev"), {"cluster.version": "9.9-shown"}))
    assert "9.9-shown" in str(plain.value)


def test_no_message_quotes_a_value_of_another_key_inside_a_secret_key():
    """A problem under a key outside the secret one may quote its values (the shapes tpu.sliceShapes admits): not
    one is shown, while the key's own value is; an admitted shape passes again."""
    shape = "checks.subslicing.shape"
    with pytest.raises(ConfigError) as raised:
        stack_config.load(with_overrides(stack_values("dev"), {shape: "4x4x4"}), secret_keys={"tpu"})
    (problem,) = [str(p) for p in raised.value.problems if p.key == shape]
    assert "'4x4x4' is not one of tpu.sliceShapes [[secret], [secret]]" in problem
    assert not [s for s in stack_values("dev")["tpu"]["sliceShapes"] if s in str(raised.value)]
    stack_config.load(with_overrides(stack_values("dev"), {shape: "2x2x2"}), secret_keys={"tpu"})


def test_a_setting_s_own_problems_and_the_rules_across_settings_are_reported_together():
    """A value of the wrong type, an unknown key and a rule across settings, in one message: the rules run on the
    config with the failed values at their defaults, and say nothing more of the keys that failed."""
    with pytest.raises(ConfigError) as raised:
        stack_config.load(
            with_overrides(
                MINIMAL,
                {
                    "network.mtu": "jumbo",
                    "tpu.machineTyp": "tpu7x-standard-4t",
                    "tpu.zone": "us-east5-a",
                    "tpu.pools": [
                        {"name": "tpu7-pool-1", "nodeCount": "sixteen"},
                        {"name": "tpu7-pool-2", "nodeCount": 16},
                    ],
                },
            )
        )
    problems = {p.key: str(p) for p in raised.value.problems}
    assert "'jumbo' is not an integer" in problems["network.mtu"]
    assert "did you mean 'machineType'?" in problems["tpu.machineTyp"]
    assert "not a zone of region us-central1" in problems["tpu.zone"]
    assert "'sixteen' is not an integer" in problems["tpu.pools[0].nodeCount"]
    assert len(raised.value.problems) == 4, raised.value

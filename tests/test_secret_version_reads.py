"""The secret versions the stack only names (serving.hfTokenSecretVersion, images.pullThrough.
dockerHubPasswordSecretVersion), read by the preview before any grant on their secret: one that does not exist, was
destroyed, or that the deployer may not see is refused under its key; a DISABLED one passes (the data source reports
every version enabled); the payload is never read."""

from __future__ import annotations

import dataclasses

import pulumi
import pytest

from harness.gcp_model import GET_SECRET_VERSION, CloudProject, Secret
from harness.mock_engine import stack_holdings
from tests.conftest import as_pulumi_values, run_stack, stack_values, with_overrides

SECRET_GRANT = "gcp:secretmanager/secretIamMember:SecretIamMember"
PROD = stack_values("prod")
TOKEN = f"projects/{PROD['project']}/secrets/hf-token"
DEV = stack_values("dev")
PASSWORD = f"projects/{DEV['project']}/secrets/docker-hub"
CREDENTIALS = {"dockerHubUsername": "myorgbot", "dockerHubPasswordSecretVersion": f"{PASSWORD}/versions/1"}
# (key, stack, overrides naming <secret>/versions/<version>, the secret)
KEYS = {
    "serving.hfTokenSecretVersion": (
        "prod",
        lambda v: {"serving.hfTokenSecretVersion": f"{TOKEN}/versions/{v}"},
        TOKEN,
    ),
    "images.pullThrough.dockerHubPasswordSecretVersion": (
        "dev",
        lambda v: {"images.pullThrough": {**CREDENTIALS, "dockerHubPasswordSecretVersion": f"{PASSWORD}/versions/{v}"}},
        PASSWORD,
    ),
}


def run_with(key, version, secret, registrations=None, **engine):
    """The stack naming ``version`` of ``key``'s secret, in a project holding ``secret`` (None: no such secret)."""
    stack, overrides_of, _ = KEYS[key]
    overrides = overrides_of(version)
    prepared = stack_holdings(as_pulumi_values(with_overrides(stack_values(stack), overrides)), {})
    held = dataclasses.replace(prepared, secrets=(secret,) if secret else ())
    cloud = engine.pop("cloud", CloudProject()).holding(held)
    return run_stack(overrides, stack=stack, cloud=cloud, registrations=registrations, **engine)


# (case, version named, the secret there (of the key's secret name), the refusal's fragment, its fix's fragment)
CASES = [
    ("no such secret", "1", None, "does not exist", "--data-file=- --project {project}`"),
    ("a secret with no version yet, by latest", "latest", (), "does not exist", "--data-file=- --project {project}`"),
    ("no such version", "3", ("ENABLED", "ENABLED"), "does not exist", "--data-file=- --project {project}`"),
    ("a destroyed version", "1", ("DESTROYED", "ENABLED"), "was destroyed at", "add a new version"),
    ("the newest version destroyed, by latest", "latest", ("ENABLED", "DESTROYED"), "was destroyed", "new version"),
    ("a secret the deployer may not see", "1", "unreadable", "could not be read (", "roles/secretmanager.viewer"),
]


# Every case for the token, read by the serving component; one for the password, read by the pull-through one through
# the same read_secret_version (each case is a run of a whole stack: the suite's minute is shared).
REFUSALS = [("serving.hfTokenSecretVersion", *case) for case in CASES] + [
    ("images.pullThrough.dockerHubPasswordSecretVersion", *CASES[2])
]


@pytest.mark.parametrize("key, case, version, states, what, fix", REFUSALS, ids=[f"{r[0]}-{r[1]}" for r in REFUSALS])
def test_a_secret_version_its_reader_would_fail_on_is_refused_before_any_grant(key, case, version, states, what, fix):
    name = KEYS[key][2]
    secret = None
    if states == "unreadable":
        secret = Secret(name, readable=False)
    elif states is not None:
        secret = Secret(name, states=states)
    registrations = []
    with pytest.raises(pulumi.RunError) as raised:
        run_with(key, version, secret, registrations=registrations)
    message = str(raised.value)
    assert f"  - {key}: secret version {name}/versions/{version} " in message, message
    assert what in message and fix.format(project=name.split("/")[1]) in message, message
    assert not [r for r in registrations if r.type == SECRET_GRANT], "no grant on a secret the preview refused"
    # the recovery, a version that is there, is the next test's


@pytest.mark.parametrize("key", KEYS)
def test_a_disabled_version_an_alias_and_latest_pass_and_the_payload_is_never_read(key):
    name = KEYS[key][2]
    # DISABLED reads as enabled: the data source sets `enabled` true whatever the state (review.read_secret_version)
    run = run_with(key, "1", Secret(name, states=("DISABLED",)))
    (read,) = [i for i in run.invocations if i.token == GET_SECRET_VERSION]
    assert read.waited_for == ["secretmanager"]
    grants = run.of_type(SECRET_GRANT)
    assert grants and all("secretmanager" in grant.dependencies for grant in grants)
    run_with(key, "latest", Secret(name, states=("DESTROYED", "ENABLED")))
    if key == "serving.hfTokenSecretVersion":  # the add-on's read takes an alias
        run_with(key, "current", Secret(name, states=("DESTROYED", "ENABLED"), aliases=(("current", 2),)))


# A new project for the prod stack: its Cloud KMS keys and its image mirror are made before its first `up`
NEW_PROD_PROJECT = CloudProject.empty("cloudkms.googleapis.com", "artifactregistry.googleapis.com")


def test_a_new_project_s_first_preview_leaves_the_read_to_the_up():
    key = "serving.hfTokenSecretVersion"
    preview = run_with(key, "1", Secret(TOKEN), cloud=NEW_PROD_PROJECT)
    assert [i.answer for i in preview.invocations if i.token == GET_SECRET_VERSION] == ["unknown"]
    assert any(line.startswith(f"{key}: not read yet") for line in preview.infos)
    with pytest.raises(pulumi.RunError, match="does not exist"):
        run_with(key, "1", None, cloud=NEW_PROD_PROJECT, preview=False)

"""The Cloud KMS keys the stack only names (cluster.secretsEncryptionKey, cluster.bootDiskEncryptionKey), read by the
preview before the stack's grant of each to its service agent: a key that does not exist, that the deployer may not
read, or that GKE and Compute Engine cannot encrypt with (another purpose, no enabled primary version) is refused
under the setting that names it, and no grant is made on it (the grant reads the key's policy first, and Cloud KMS's
404 would fail the `up` there, halfway through)."""

from __future__ import annotations

import dataclasses

import pulumi
import pytest

from components.config_base import ConfigError
from components.gcp.config import KmsKey
from components.gcp.review import kms_key_review
from harness.gcp_model import GET_KEY, CloudProject, CryptoKey
from harness.mock_engine import stack_holdings
from tests.conftest import as_pulumi_values, run_stack, stack_values

KEY_GRANT = "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember"
PROD = stack_values("prod")
HELD = stack_holdings(as_pulumi_values(PROD), {})
SETTINGS = {
    "cluster.secretsEncryptionKey": PROD["cluster"]["secretsEncryptionKey"],
    "cluster.bootDiskEncryptionKey": PROD["cluster"]["bootDiskEncryptionKey"],
}


def run_holding(**holdings):
    registrations = []
    with pytest.raises(pulumi.RunError) as raised:
        run_stack(
            {},
            stack="prod",
            cloud=CloudProject().holding(dataclasses.replace(HELD, **holdings)),
            registrations=registrations,
        )
    return str(raised.value), registrations


@pytest.mark.parametrize("setting", SETTINGS)
def test_a_key_that_does_not_exist_is_refused_before_its_grant(setting):
    key = SETTINGS[setting]
    message, registrations = run_holding(keys=tuple(k for k in HELD.keys if k.name != key))
    assert f"  - {setting}: Cloud KMS key {key} does not exist (make it (`gcloud kms keys create " in message, message
    assert "--project my-tpu-prod-project --purpose encryption`" in message, message
    assert not [r for r in registrations if r.type == KEY_GRANT and r.inputs["cryptoKeyId"] == key], "no grant on it"


def test_the_keys_there_are_read_and_granted():
    # The prod stack as it is: run_program's project holds stack_holdings of the config, HELD, both keys in it; the run
    # is the one other tests make of prod (tests/conftest.py caches it), not the same run again under an explicit cloud
    assert set(SETTINGS.values()) <= {k.name for k in HELD.keys}
    run = run_stack(stack="prod")
    reads = [i for i in run.invocations if i.token == GET_KEY]
    assert len(reads) == len(SETTINGS) and all(read.answer == "answered" for read in reads)
    assert {g.inputs["cryptoKeyId"] for g in run.of_type(KEY_GRANT)} == set(SETTINGS.values())


# Keys GKE and Compute Engine cannot encrypt with (their fields as the read answers them), what the refusal says of
# each and a fragment of its fix
UNUSABLE = {
    "signing key": (
        {"purpose": "ASYMMETRIC_SIGN"},
        "has the purpose ASYMMETRIC_SIGN: GKE and Compute Engine encrypt only with an ENCRYPT_DECRYPT key",
        "name a key made with `gcloud kms keys create <key> --keyring ",
    ),
    "MAC key": ({"purpose": "MAC", "primary": ""}, "has the purpose MAC:", "--purpose encryption`"),
    "no primary": ({"primary": ""}, "has no primary version: nothing encrypts with it", "make an enabled version its"),
    "disabled primary": (
        {"primary": "DISABLED"},
        "has a DISABLED primary version",
        "--project my-tpu-prod-project --primary`",
    ),
    "destroyed primary": (
        {"primary": "DESTROYED"},
        "has a DESTROYED primary version",
        "gcloud kms keys versions create --key ",
    ),
}


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("unusable", UNUSABLE)
def test_the_review_of_a_key_nothing_can_encrypt_with_refuses_it_under_its_setting(setting, unusable):
    """What the review of the key's read (kms_key_review) says of each kind; the runs below hold its wiring: the
    program reads the key's purpose and primary version, refuses before the grant, and recovers."""
    odd, said, fix = UNUSABLE[unusable]
    key = SETTINGS[setting]
    found = dataclasses.replace(CryptoKey(key), **odd)
    message = str(ConfigError(kms_key_review(setting, KmsKey.parse(key), found.purpose, found.primary)))
    assert f"  - {setting}: Cloud KMS key {key} {said}" in message, message
    assert fix in message, message


@pytest.mark.parametrize(
    "setting, unusable",
    # the purpose read, and a primary version read as none (MAC); a primary version's state read (DISABLED)
    [("cluster.secretsEncryptionKey", "MAC key"), ("cluster.bootDiskEncryptionKey", "disabled primary")],
)
def test_a_key_nothing_can_encrypt_with_is_refused_before_its_grant(setting, unusable):
    """GKE's Secrets encryption and Compute Engine's boot disks encrypt with the key's primary version: a key of
    another purpose, or with no enabled primary, passed the preview and failed the cluster or its pools in the `up`."""
    odd, said, _ = UNUSABLE[unusable]
    key = SETTINGS[setting]
    keys = tuple(dataclasses.replace(k, **odd) if k.name == key else k for k in HELD.keys)
    message, registrations = run_holding(keys=keys)
    assert f"  - {setting}: Cloud KMS key {key} {said}" in message, message
    assert not [r for r in registrations if r.type == KEY_GRANT and r.inputs["cryptoKeyId"] == key], "no grant on it"
    # the recovery, the key as prod's own project holds it (usable): the run other tests make of prod, cached
    assert CryptoKey(key) in HELD.keys
    assert key in {g.inputs["cryptoKeyId"] for g in run_stack(stack="prod").of_type(KEY_GRANT)}

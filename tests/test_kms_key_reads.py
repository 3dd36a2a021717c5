"""The Cloud KMS keys the stack only names (cluster.secretsEncryptionKey, cluster.bootDiskEncryptionKey), read by the
preview before the stack's grant of each to its service agent: a key that does not exist, or that the deployer may
not read, is refused under the setting that names it, and no grant is made on it (the grant reads the key's policy
first, and Cloud KMS's 404 would fail the `up` there, halfway through)."""

from __future__ import annotations

import dataclasses

import pulumi
import pytest

from harness.gcp_model import GET_KEY, CloudProject
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
    message, registrations = run_holding(keys=tuple(k for k in HELD.keys if k != key))
    assert f"  - {setting}: Cloud KMS key {key} does not exist (make it (`gcloud kms keys create " in message, message
    assert "--project my-tpu-prod-project --purpose encryption`" in message, message
    assert not [r for r in registrations if r.type == KEY_GRANT and r.inputs["cryptoKeyId"] == key], "no grant on it"


def test_the_keys_there_are_read_and_granted():
    # The prod stack as it is: run_program's project holds stack_holdings of the config, HELD, both keys in it; the run
    # is the one other tests make of prod (tests/conftest.py caches it), not the same run again under an explicit cloud
    assert set(SETTINGS.values()) <= set(HELD.keys)
    run = run_stack(stack="prod")
    reads = [i for i in run.invocations if i.token == GET_KEY]
    assert len(reads) == len(SETTINGS) and all(read.answer == "answered" for read in reads)
    assert {g.inputs["cryptoKeyId"] for g in run.of_type(KEY_GRANT)} == set(SETTINGS.values())

"""make images: the images a stack runs, the commands that pin each by digest, and the copies that fill the mirror."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import FIXTURE_STACKS
from tools import images

MIRROR = "us-central1-docker.pkg.dev/my-org-artifacts/tpu-gke-mirror"
# The node audit setup image, by the digest docker-library/repo-info records for its tag (01a70542).
# JobSet's controller, by the digest its promotion to registry.k8s.io recorded (kubernetes/k8s.io#9456).
JOBSET = "registry.k8s.io/jobset/jobset:v0.12.0@sha256:e75536f1135b7bb2f19f8c3b620782fbdd9091d73398e3a272f9a5fed322980d"
BUSYBOX = "docker.io/library/busybox:1.37.0@sha256:9db7b59979c38555a39def84a31fb98b5296952f9e3afd4f6f11f05b07adfab0"


def listing(capsys: pytest.CaptureFixture[str], stack: str, stack_dir: Path = FIXTURE_STACKS) -> list[str]:
    assert images.main(["--stack", stack, "--stack-dir", str(stack_dir)]) == 0
    return capsys.readouterr().out.splitlines()


def test_prod_lists_each_image_then_its_pin_then_its_copy_into_the_mirror(capsys):
    lines = listing(capsys, "prod")
    assert "# serving.image: docker.io/vllm/vllm-tpu:nightly-20260430-18ed615-5b39b26 (the vLLM model servers)" in lines
    assert (
        "pulumi config set --path platform.kueue.image registry.k8s.io/kueue/kueue:v0.17.8"
        "@$(crane digest registry.k8s.io/kueue/kueue:v0.17.8)"
    ) in lines
    assert f"crane copy {JOBSET} {MIRROR}/registry.k8s.io/jobset/jobset:v0.12.0" in lines
    assert (
        f"crane copy tpuongke/kueue-slice-controller:v0.8.0-200 {MIRROR}/docker.io/tpuongke/kueue-slice-controller:v0.8.0-200"
    ) in lines
    # The node audit logging's two images, which a production stack deploys, go into the mirror too.
    assert f"crane copy docker.io/fluent/fluent-bit:5.1.1 {MIRROR}/docker.io/fluent/fluent-bit:5.1.1" in lines
    assert f"crane copy {BUSYBOX} {MIRROR}/docker.io/library/busybox:1.37.0" in lines
    pins = [line for line in lines if line.startswith("pulumi config set")]
    copies = [line for line in lines if line.startswith("crane copy")]
    # Twelve images (`make bench`'s among them), each copied; nine to pin: the JobSet, staging and node audit setup
    # images' defaults carry their digest.
    assert len(copies) == 12
    assert len(pins) == 9
    assert (
        "crane copy quay.io/inference-perf/inference-perf:v0.7.0 "
        + (f"{MIRROR}/quay.io/inference-perf/inference-perf:v0.7.0")
        in lines
    )
    by_default = ("platform.jobset.image", "serving.weightsStaging.image", "nodeAuditLogging.setupImage")
    assert not [line for line in pins if any(f" {key} " in line for key in by_default)]
    assert lines.index(pins[-1]) < lines.index(copies[0]), "pin first, then copy by the pinned digest"


def test_a_pinned_image_is_copied_by_its_digest_and_asks_for_no_pin(capsys, tmp_path):
    digest = "sha256:" + "b" * 64
    stack_file = (
        (FIXTURE_STACKS / "Pulumi.prod.yaml")
        .read_text()
        .replace(
            "    router:\n",
            f"    image: docker.io/vllm/vllm-tpu:nightly-20260430-18ed615-5b39b26@{digest}\n    router:\n",
            1,
        )
    )
    (tmp_path / "Pulumi.prod.yaml").write_text(stack_file)
    lines = listing(capsys, "prod", tmp_path)
    assert not [line for line in lines if line.startswith("pulumi config set --path serving.image ")]
    source = f"docker.io/vllm/vllm-tpu:nightly-20260430-18ed615-5b39b26@{digest}"
    assert f"crane copy {source} {MIRROR}/docker.io/vllm/vllm-tpu:nightly-20260430-18ed615-5b39b26" in lines


def test_a_stack_that_requires_digests_it_lacks_is_still_listed(capsys, tmp_path):
    """The listing is what such a stack needs: the digest rule does not stop it (any other problem does)."""
    text = (FIXTURE_STACKS / "Pulumi.prod.yaml").read_text()
    (tmp_path / "Pulumi.prod.yaml").write_text(text.replace("    requireDigests: false\n", ""))
    assert len([line for line in listing(capsys, "prod", tmp_path) if line.startswith("pulumi config set")]) == 9
    shutil.copy(FIXTURE_STACKS / "Pulumi.dev.yaml", tmp_path / "Pulumi.bad.yaml")
    with (tmp_path / "Pulumi.bad.yaml").open("a") as out:
        out.write("  tpu-dynamic-slicing:images:\n    mirror: docker.io/my-org\n")
    assert images.main(["--stack", "bad", "--stack-dir", str(tmp_path)]) == 1
    assert "images.mirror" in capsys.readouterr().err


def test_with_pull_through_repositories_there_is_nothing_to_copy(capsys):
    """dev pulls through the repositories the stack makes: the listing says which serves which image, copies none."""
    lines = listing(capsys, "dev")
    assert not [line for line in lines if line.startswith("crane copy")]
    assert len([line for line in lines if line.startswith("pulumi config set")]) == 8
    served = "\n".join(lines[lines.index(next(line for line in lines if "Nothing to copy" in line)) :])
    repository = "us-central1-docker.pkg.dev/my-tpu-project/qwen-serving-cluster-docker-io"
    assert f"# {repository} (DOCKER_HUB) serves:" in lines
    assert f"#   {repository}/vllm/vllm-tpu:nightly-20260430-18ed615-5b39b26" in lines
    assert "cloud-tpu-images" not in served, "Google's registries need no repository"


def test_public_nodes_pull_each_image_from_its_registry_and_copy_nothing(capsys, tmp_path):
    text = (FIXTURE_STACKS / "Pulumi.dev.yaml").read_text()
    (tmp_path / "Pulumi.dev.yaml").write_text(
        text.replace("    deletionProtection: false\n", "    deletionProtection: false\n    privateNodes: false\n")
    )
    lines = listing(capsys, "dev", tmp_path)
    assert not [line for line in lines if line.startswith("crane copy") or "Nothing to copy" in line]

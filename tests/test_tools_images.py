"""make images: the images a stack runs, the commands that pin each by digest, and the copies that fill the mirror."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from components.config_base import ImageReference
from tests.conftest import FIXTURE_STACKS, run_stack
from tools import images

MIRROR = "us-central1-docker.pkg.dev/my-org-artifacts/tpu-gke-mirror"


def listing(capsys: pytest.CaptureFixture[str], stack: str, stack_dir: Path = FIXTURE_STACKS) -> list[str]:
    assert images.main(["--stack", stack, "--stack-dir", str(stack_dir)]) == 0
    return capsys.readouterr().out.splitlines()


def unpinned_settings(stack: str) -> list[str]:
    """The settings of the images the program says ``stack`` runs (its `images` output) that carry no digest."""
    return sorted(i["setting"] for i in run_stack(stack=stack).outputs["images"] if "@sha256:" not in i["source"])


def test_prod_lists_each_image_then_its_pin_then_its_copy_into_the_mirror(capsys):
    """The listing and the program agree: each image the stack runs (its `images` output, `make bench`'s and the
    node audit logging's among them) is listed under its setting and copied into the mirror, by its digest when it
    has one (the mirror tags it with the source's tag); each without a digest is pinned first."""
    lines = listing(capsys, "prod")
    stack_images = run_stack(stack="prod").outputs["images"]
    pins = [line for line in lines if line.startswith("pulumi config set")]
    copies = [line for line in lines if line.startswith("crane copy")]
    for image in stack_images:
        setting, source = image["setting"], image["source"]
        assert any(line.startswith(f"# {setting}: {source} (") for line in lines), setting
        assert any(line.startswith(f"crane copy {source} {MIRROR}/") for line in copies), setting
    assert len(copies) == len(stack_images)
    assert len(pins) == len(unpinned_settings("prod"))
    for setting in unpinned_settings("prod"):
        assert [line for line in pins if f" --path {setting} " in line], setting
    # pinned by the digest its tag points at now
    kueue = next(i["source"] for i in stack_images if i["setting"] == "platform.kueue.image")
    assert f"pulumi config set --path platform.kueue.image {kueue}@$(crane digest {kueue})" in pins
    # by digest into the mirror, tagged there with the source's tag
    for source in (i["source"] for i in stack_images if "@sha256:" in i["source"]):
        reference = ImageReference.parse(source)
        assert f"crane copy {source} {MIRROR}/{reference.qualified_name}:{reference.tag}" in copies, source
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
    pins = [line for line in listing(capsys, "prod", tmp_path) if line.startswith("pulumi config set")]
    assert len(pins) == len(unpinned_settings("prod"))
    shutil.copy(FIXTURE_STACKS / "Pulumi.dev.yaml", tmp_path / "Pulumi.bad.yaml")
    with (tmp_path / "Pulumi.bad.yaml").open("a") as out:
        out.write("  tpu-dynamic-slicing:images:\n    mirror: docker.io/my-org\n")
    assert images.main(["--stack", "bad", "--stack-dir", str(tmp_path)]) == 1
    assert "images.mirror" in capsys.readouterr().err


@pytest.mark.parametrize("written", ["foo", "[1]", "12"])
def test_an_images_block_that_is_no_mapping_is_refused_as_the_loader_refuses_it(capsys, tmp_path, written):
    """The digest rule's override leaves such a block alone: the stack is refused under `images`, without a
    traceback, and a mapping written in its place is listed."""
    shutil.copy(FIXTURE_STACKS / "Pulumi.dev.yaml", tmp_path / "Pulumi.bad.yaml")
    with (tmp_path / "Pulumi.bad.yaml").open("a") as out:
        out.write(f"  tpu-dynamic-slicing:images: {written}\n")
    assert images.main(["--stack", "bad", "--stack-dir", str(tmp_path)]) == 1
    assert "images" in capsys.readouterr().err
    text = (tmp_path / "Pulumi.bad.yaml").read_text()
    (tmp_path / "Pulumi.bad.yaml").write_text(text.replace(f"images: {written}", "images: {}"))
    assert listing(capsys, "bad", tmp_path)


def test_with_pull_through_repositories_there_is_nothing_to_copy(capsys):
    """dev pulls through the repositories the stack makes: the listing says which serves which image, copies none."""
    lines = listing(capsys, "dev")
    assert not [line for line in lines if line.startswith("crane copy")]
    assert len([line for line in lines if line.startswith("pulumi config set")]) == len(unpinned_settings("dev"))
    served = "\n".join(lines[lines.index(next(line for line in lines if "Nothing to copy" in line)) :])
    # the vLLM image, from Docker Hub, as the program pulls it: through the Docker Hub repository
    (vllm,) = [i["pull"] for i in run_stack(stack="dev").outputs["images"] if i["setting"] == "serving.image"]
    assert f"#   {vllm}" in lines
    headers = [line.split()[1] for line in lines if line.endswith(" (DOCKER_HUB) serves:")]
    assert [repository for repository in headers if vllm.startswith(f"{repository}/")], headers
    assert "cloud-tpu-images" not in served, "Google's registries need no repository"


def test_public_nodes_pull_each_image_from_its_registry_and_copy_nothing(capsys, tmp_path):
    text = (FIXTURE_STACKS / "Pulumi.dev.yaml").read_text()
    (tmp_path / "Pulumi.dev.yaml").write_text(
        text.replace("    deletionProtection: false\n", "    deletionProtection: false\n    privateNodes: false\n")
    )
    lines = listing(capsys, "dev", tmp_path)
    assert not [line for line in lines if line.startswith("crane copy") or "Nothing to copy" in line]

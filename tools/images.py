"""The images a stack runs, and the commands that pin each by digest and fill the mirror with them.

python -m tools.images --stack prod   # make images STACK=prod

Offline: it reads Pulumi.<stack>.yaml (the stack's `images` output says the same after an `up`). The commands
are for a machine that reaches the source registries, with crane (github.com/google/go-containerregistry,
cmd/crane) and gcloud's credential helper for Artifact Registry (`gcloud auth configure-docker
<location>-docker.pkg.dev`). First each image still pulled by its tag is pinned: `crane digest` asks its registry
for the digest its tag points at now, and `pulumi config set` writes it into the stack file under the image's
setting. Then each image is copied into the mirror by that digest: `crane copy` copies the manifest (a
multi-platform index with every platform's image) byte for byte, so the digest in the stack file is the mirror's
too, and tags it there with the source's tag.

Where the stack makes pull-through repositories (images.pullThrough), there is nothing to copy: each repository
fetches an image from its registry at its first pull, by the digest or tag the stack names. The listing says which
repository serves which images, and still gives the pin commands.
"""

from __future__ import annotations

import argparse
import json
import sys

from components.config_base import NAMESPACE, ConfigError, ImageReference, PullPath
from components.gcp.config import RemoteRepository
from components.hardening.rules import StackImage
from tools.stack_file import NoStackFile, StackFileError, add_stack_dir_option, stack_config_values


def commands(images: list[StackImage], pull_path: PullPath, repositories: list[RemoteRepository]) -> list[str]:
    """The listing: what runs each image, then the pin commands of those without a digest, then the copies into the
    mirror, or which pull-through repository serves which images."""
    lines = [f"# {image.key}: {image.image} ({image.runs})" for image in images]
    unpinned = [image for image in images if not image.digest]
    if unpinned:
        lines += ["", "# 1. Pin each image pulled by its tag to the digest its registry serves now:"]
        lines += [image.pin_command for image in unpinned]
    step = "2" if unpinned else "1"
    if pull_path.mirror:
        then = " (after step 1, once the stack file holds the digests: run this again)" if unpinned else ""
        lines += ["", f"# {step}. Fill the mirror {pull_path.mirror}{then}:"]
        lines += [f"crane copy {image.image} {_destination(image, pull_path)}" for image in images]
    elif repositories:
        lines += [
            "",
            f"# {step}. Nothing to copy: the stack's pull-through repositories fetch each image at its first pull.",
        ]
        for repository in repositories:
            served = [pull_path.image(image.image) for image in images if image.registry == repository.registry]
            lines += [f"# {repository.path} ({repository.upstream}) serves:", *(f"#   {pulled}" for pulled in served)]
    return lines


def _destination(image: StackImage, pull_path: PullPath) -> str:
    """The mirror's copy of ``image``: its pulled name, tagged with the source's tag (by digest when it has none)."""
    pulled = ImageReference.parse(pull_path.image(image.image))
    return f"{pulled.name}:{pulled.tag}" if pulled.tag else f"{pulled.name}@{pulled.digest}"


def without_the_digest_rule(values: dict[str, str]) -> dict[str, str]:
    """The stack's config with images.requireDigests false: the listing is what a stack missing digests needs, so
    the rule that refuses it must not stop it (every other problem still does)."""
    key = f"{NAMESPACE}:images"
    # A block that is no mapping (or no JSON) is left as it is, for the loader to refuse as it refuses any such block.
    try:
        block = json.loads(values.get(key, "{}"))
    except json.JSONDecodeError:
        return values
    if not isinstance(block, dict):
        return values
    return {**values, key: json.dumps({**block, "requireDigests": False})}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", required=True)
    add_stack_dir_option(parser)
    args = parser.parse_args(argv)
    from components import stack as stack_config

    try:
        values, secret_keys = stack_config_values(args.stack, args.stack_dir)
        config = stack_config.load_pulumi_values(without_the_digest_rule(values), secret_keys).config
    except (ConfigError, StackFileError) as error:
        print(f"stack {args.stack}: {error}", file=sys.stderr)
        return 1
    except NoStackFile:
        print(f"there is no Pulumi.{args.stack}.yaml in {args.stack_dir}", file=sys.stderr)
        return 1
    print("\n".join(commands(config.stack_images(), config.pull_path(), config.pull_through_repositories())))
    return 0


if __name__ == "__main__":
    sys.exit(main())

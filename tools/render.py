"""Offline preview: run the program for one stack under mocks and write build/render/<stack>/.

    python -m tools.render --stack dev [--out build/render]

Writes the files of FILES and prints a summary. resources.json holds each resource's inputs, what it waits for
(``dependsOn``: its explicit dependencies, every resource its inputs come from, its explicit provider) and its
lifecycle options; graph.txt the waves in which `pulumi up` creates and `pulumi destroy` deletes the resources, and
what each read of the cloud (invoke) waits for, which waves.md draws as Mermaid flowcharts: a pull request's render
diff shows every change of order and of lifecycle. empty-project.txt is the stack's first preview and up in a new
project, where Google Cloud refuses a call to an API not yet enabled (harness/gcp_model.py): the render fails if
any call would be refused there. kubernetes.yaml holds every object the program declares plus those of Helm
releases of a local chart (rendered with helm-python-sdk, as Helm would install them); releases of published charts
stay in resources.json only, since rendering them would need the registry. An invalid stack config prints the
validation message, exits 1 and leaves no render behind.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from components import naming

# The offline render is the program run under the harness's mocks of the engine and of Google Cloud: the one tool
# that imports the harness (tests/test_imports.py holds it).
from harness.gcp_model import CloudProject, ServiceDisabled, ServiceIdentityRefused, api_of
from harness.mock_engine import HELM_RELEASE, Invocation, ProgramRun, Registration, run_program, sanitize
from tools.stack_file import (
    PROJECT_ROOT,
    NoStackFile,
    StackFileError,
    add_stack_dir_option,
    stack_config_values,
    stack_names,
)

# Types whose inputs are a Kubernetes object (not Helm releases, providers or our components).
_NOT_OBJECTS = ("pulumi:providers:", "kubernetes:helm.sh/")


def render(stack: str, stack_dir: Path = PROJECT_ROOT) -> tuple[dict[str, str], ProgramRun]:
    """The render files for ``stack`` as text, plus the run they came from."""
    values, secret_keys = stack_config_values(stack, stack_dir)
    run = run_program(values, secret_keys, stack=stack, preview=True)
    files = {
        "resources.json": _json(resources_document(run.registrations)),
        "kubernetes.yaml": kubernetes_document(run.registrations),
        "outputs.json": _json(dict(sorted(run.outputs.items()))),
        "graph.txt": graph_document(run.registrations, run.invocations),
        "waves.md": waves_document(stack, run.registrations),
        "empty-project.txt": empty_project_document(stack, values, secret_keys),
    }
    return files, run


def new_project(values: dict[str, str], secret_keys: list[str]) -> CloudProject:
    """The project a stack's first `up` goes to: a new one; a cluster made elsewhere has GKE's APIs on. An image
    mirror (images.mirror) exists before the stack's first `up`, filled with the stack's images, so Artifact
    Registry is on where it lives; the model has one project, so that is this one. So does a Cloud KMS key the stack
    grants (one of its own project: cluster.secretsEncryptionKey, cluster.bootDiskEncryptionKey): it is made through
    the Cloud KMS API of its project before the first `up`, so that API is on, and the stack does not enable it."""
    from components import stack as stack_config

    config = stack_config.load_pulumi_values(values, secret_keys).config
    already_on: tuple[str, ...] = ("artifactregistry.googleapis.com",) if config.images.mirror else ()
    if any(grant.in_project(config.project) for grant in config.key_grants()):
        already_on += ("cloudkms.googleapis.com",)
    if config.cluster.existing.enabled:
        return CloudProject.empty("container.googleapis.com", "compute.googleapis.com", *already_on)
    return CloudProject.empty(*already_on)


def empty_project_runs(stack: str, values: dict[str, str], secret_keys: list[str]) -> dict[str, ProgramRun]:
    """The stack's first `pulumi preview` and `pulumi up` in a new project; ServiceDisabled if a call is refused."""
    cloud = new_project(values, secret_keys)
    return {
        step: run_program(values, secret_keys, stack=stack, preview=step == "preview", cloud=cloud)
        for step in ("preview", "up")
    }


def empty_project_document(stack: str, values: dict[str, str], secret_keys: list[str]) -> str:
    """empty-project.txt: what each read of the cloud waited for and how the new project answered it, and
    the Google Cloud resources the first `up` created, each after the API it goes through."""
    runs = empty_project_runs(stack, values, secret_keys)
    lines = [
        f"# The first `pulumi preview` and `pulumi up` of this stack in a new project ({new_project(values, secret_keys).describe()}),",
        "# as the model of Google Cloud answers them (harness/gcp_model.py): a call of an API not yet enabled is refused.",
    ]
    for step, run in runs.items():
        lines += sorted(f"{step}: {_invocation_line(i)}: {i.answer}" for i in run.invocations)  # they run in parallel
    created = collections.Counter(
        api_of(r.type) for r in runs["up"].registrations if r.custom and r.type.startswith("gcp:")
    )
    apis = ", ".join(f"{(api or '').split('.')[0]} {count}" for api, count in sorted(created.items()))
    lines.append(f"up: {sum(created.values())} Google Cloud resources created, each after its API ({apis or 'none'})")
    return "\n".join(lines) + "\n"


def _invocation_line(invocation: Invocation) -> str:
    waits = ", ".join(invocation.waited_for) or "nothing (runs when the program starts)"
    return f"invoke {invocation.token} waits for {waits}"


# What a render writes, each file a review surface. The pull-request workflow diffs every file of every stack against
# the base's render (make render-diff does the same here); GOLDEN, the render's summaries, are also committed under
# tests/golden/<stack>/ (make golden): the order of `up` and `destroy`, the first `up` in a new project and the
# outputs, small enough to read in every change and kept in the history beside the change that made them (and the docs
# draw dev's waves.md). The full dumps, every input and every manifest, are the workflow's diff alone.
FILES = ("resources.json", "kubernetes.yaml", "outputs.json", "graph.txt", "waves.md", "empty-project.txt")
GOLDEN = ("outputs.json", "graph.txt", "waves.md", "empty-project.txt")

COMPONENT_PREFIX = "tpu-gke:"  # our own ComponentResources: they group resources and create nothing


def creates_something(registration: Registration) -> bool:
    """A node of the graph: a custom resource, a provider or a remote component (a yaml/v2 ConfigGroup)."""
    return not registration.type.startswith(COMPONENT_PREFIX)


def depends_on(registration: Registration) -> list[str]:
    """What a resource waits for: its dependencies and the provider it is created through."""
    names = set(registration.dependencies)
    if registration.provider_name:
        names.add(registration.provider_name)
    return sorted(names)


def resources_document(registrations: list[Registration]) -> list[dict[str, Any]]:
    entries = []
    for r in registrations:
        entry: dict[str, Any] = {"type": r.type, "name": r.name, "parent": r.parent, "inputs": sanitize(r.inputs)}
        if creates_something(r):
            entry["dependsOn"] = depends_on(r)
        if r.options:
            entry["options"] = r.options
        entries.append(entry)
    return sorted(entries, key=lambda e: (e["type"], e["name"]))


def create_waves(registrations: list[Registration]) -> list[list[str]]:
    """Resources in the order `pulumi up` can create them: each wave needs only earlier waves. Our components are
    left out (they create nothing); a resource that waits on one waits on its children, which the SDK already lists
    among its dependencies."""
    return _waves(registrations, destroy=False)


def destroy_waves(registrations: list[Registration]) -> list[list[str]]:
    """Resources in the order `pulumi destroy` deletes them: each after everything that waits on it."""
    return _waves(registrations, destroy=True)


def _waves(registrations: list[Registration], destroy: bool) -> list[list[str]]:
    custom = {r.name: r for r in registrations if creates_something(r)}
    waiting = {name: {d for d in depends_on(r) if d in custom} for name, r in custom.items()}
    if destroy:  # each waits for those that wait on it
        waiting = {name: {other for other, needs in waiting.items() if name in needs} for name in waiting}
    waves: list[list[str]] = []
    done: set[str] = set()
    while waiting:
        ready = sorted(name for name, needs in waiting.items() if needs <= done)
        if not ready:
            raise ValueError(f"dependency cycle among {sorted(waiting)}")
        waves.append(ready)
        done.update(ready)
        waiting = {name: needs for name, needs in waiting.items() if name not in done}
    return waves


def graph_document(registrations: list[Registration], invocations: Sequence[Invocation] = ()) -> str:
    """graph.txt: the create waves of `pulumi up`, the delete waves of `pulumi destroy`, and what each
    read of the cloud waits for."""
    lines = ["# pulumi up creates each wave once the waves above it exist"]
    lines += [f"create {i}: {', '.join(wave)}" for i, wave in enumerate(create_waves(registrations), 1)]
    lines += ["", "# pulumi destroy deletes each wave once the waves above it are gone"]
    lines += [f"destroy {i}: {', '.join(wave)}" for i, wave in enumerate(destroy_waves(registrations), 1)]
    if invocations:
        lines += ["", "# reads of the cloud: each invoke runs once what it waits for exists"]
        lines += sorted({_invocation_line(i) for i in invocations})
    return "\n".join(lines) + "\n"


WAVE_NAMES_PER_LINE = 4  # names per line of a wave's box: the picture stays narrow enough to read


def waves_document(stack: str, registrations: list[Registration]) -> str:
    """waves.md: graph.txt's create and destroy waves as Mermaid flowcharts (GitHub and the docs site draw them)."""

    def flowchart(kind: str, waves: list[list[str]]) -> list[str]:
        lines = ["```mermaid", "flowchart TD"]
        for i, wave in enumerate(waves, 1):
            rows = [", ".join(wave[j : j + WAVE_NAMES_PER_LINE]) for j in range(0, len(wave), WAVE_NAMES_PER_LINE)]
            label = "<br/>".join([f"<b>{kind} {i}</b>", *rows]).replace('"', "#quot;")
            lines.append(f'  {kind}{i}["{label}"]')
        lines += [f"  {kind}{i} --> {kind}{i + 1}" for i in range(1, len(waves))]
        return [*lines, "```"]

    lines = [
        f"# The {stack} stack: create and destroy waves",
        "",
        "The waves of graph.txt as pictures (tools/render.py writes both from the same dependency graph).",
        "",
        "## pulumi up creates each wave once the waves above it exist",
        "",
        *flowchart("create", create_waves(registrations)),
        "",
        "## pulumi destroy deletes each wave once the waves above it are gone",
        "",
        *flowchart("destroy", destroy_waves(registrations)),
    ]
    return "\n".join(lines) + "\n"


def kubernetes_objects(registrations: list[Registration]) -> list[dict[str, Any]]:
    objects = []
    for r in registrations:
        if r.type == HELM_RELEASE and r.inputs["chart"].startswith(("./", "../", "/")):  # a chart of this repository
            objects.extend(local_chart_objects(r.inputs))
        elif r.type.startswith("kubernetes:") and not r.type.startswith(_NOT_OBJECTS):
            inputs = sanitize(r.inputs)
            if "objs" in inputs:  # yaml/v2 ConfigGroup
                objects.extend(inputs["objs"])
            elif "apiVersion" in inputs and "kind" in inputs:
                objects.append(inputs)
    return sorted(objects, key=_object_sort_key)


def local_chart_objects(release: dict[str, Any]) -> list[dict[str, Any]]:
    """The objects Helm would install for a release of a chart in this repository."""
    import helm_python  # a dev dependency: binds Helm's Go SDK, so no helm binary is needed

    with helm_python.Chart.load(PROJECT_ROOT / release["chart"]) as chart:
        manifests = chart.render(release.get("values") or {}, name=release["name"], namespace=release["namespace"])
    # libyaml's parser (PyYAML's CSafeLoader), the same objects five times faster than the pure-Python one on what
    # Helm renders of our charts (the dumps below stay pure-Python: libyaml's emitter writes other text)
    return [doc for text in manifests.values() for doc in yaml.load_all(text, Loader=yaml.CSafeLoader) if doc]


def _object_sort_key(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    metadata = obj.get("metadata") or {}
    return (obj["apiVersion"], obj["kind"], metadata.get("namespace", ""), metadata.get("name", ""))


def kubernetes_document(registrations: list[Registration]) -> str:
    return yaml.safe_dump_all(kubernetes_objects(registrations), sort_keys=True)  # no object: ""


def summary(stack: str, run: ProgramRun, stack_dir: Path = PROJECT_ROOT) -> list[str]:
    from components import stack as stack_config

    config = stack_config.load_pulumi_values(*stack_config_values(stack, stack_dir)).config
    counts = collections.Counter(r.type for r in run.registrations)
    lines = [f"stack {stack}: {len(run.registrations)} resources"]
    lines += [f"  {count:3d}  {type_token}" for type_token, count in sorted(counts.items())]
    lines += ["TPU capacity:"] + [f"  {line}" for line in config.tpu.capacity_lines()]
    lines += ["TPU admission:"] + [
        f"  {line}" for line in run.outputs.get(naming.ADMISSION_PLAN_OUTPUT, ["no slice workloads"])
    ]
    lines += ["Order (graph.txt):"] + [
        f"  {line}" for line in graph_document(run.registrations, run.invocations).splitlines() if line
    ]
    return lines


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True) + "\n"


# A stack's name as Pulumi takes it (pulumi/pulumi sdk/go/common/tokens/stack_name.go, ParseStackName), less '.' and
# '..'. It names the folder the render replaces, so it is checked before anything is removed: '', '.', '..' or a path
# would have the render remove the output folder, its parent, or any folder the path names.
STACK_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")


def stack_name(text: str) -> str:
    if not STACK_NAME.fullmatch(text) or text in (".", ".."):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a stack name (1-100 letters, digits, '-', '_' or '.', not '.' or '..'): "
            "the X of a Pulumi.X.yaml"
        )
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", required=True, type=stack_name, help="the X of Pulumi.X.yaml in --stack-dir")
    parser.add_argument("--out", type=Path, default=PROJECT_ROOT / "build" / "render")
    add_stack_dir_option(parser)
    parser.add_argument(
        "--keep-on-failure",
        action="store_true",
        help="leave an existing render in place when this one fails (make golden: committed files stay)",
    )
    parser.add_argument("--golden", action="store_true", help="write only the files committed as goldens (make golden)")
    args = parser.parse_args(argv)
    target = args.out / args.stack
    if target.exists() and not args.keep_on_failure:
        shutil.rmtree(target)  # a stale render must never pass for the current one
    from components.config_base import ConfigError

    try:
        files, run = render(args.stack, args.stack_dir)
    except ConfigError as error:
        why = f":\n{error}"
    except StackFileError as error:
        why = f": {error}"
    except (ServiceDisabled, ServiceIdentityRefused) as refusal:
        why = f": in a new project, Google Cloud refuses {refusal}"
    except NoStackFile:
        stacks = stack_names(args.stack_dir)
        why = (
            f": there is no Pulumi.{args.stack}.yaml in {args.stack_dir}; the stacks are: {', '.join(stacks) or 'none'}"
        )
    else:
        why = ""
    if why:
        print(f"render of stack {args.stack} failed{why}", file=sys.stderr)
        return 1
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for name, text in files.items():
        if name in GOLDEN or not args.golden:
            (target / name).write_text(text)
    print("\n".join(summary(args.stack, run, args.stack_dir)))
    print(f"wrote {target.relative_to(PROJECT_ROOT) if target.is_relative_to(PROJECT_ROOT) else target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What the rules read: one resource of the stack in plain Python, as the engine hands it over.

Inputs (or, for a stack rule, outputs) come in the engine's camelCase form. A value only known
after apply is one of the engine's unknown sentinels; a rule that needs such a value raises
``UnknownValue`` instead of guessing, and the pack reports that the rule could not run in preview.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# The Pulumi wire protocol's stand-ins for values unknown during preview (one per value kind).
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # string (also the Python SDK's rpc.UNKNOWN)
UNKNOWN_SENTINELS = frozenset(
    {
        "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7",  # bool
        "3eeb2bf0-c639-47a8-9e75-3b44932eb421",  # number
        UNKNOWN,
        "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",  # array
        "030794c1-ac77-496b-92df-f27374a8bd58",  # asset
        "e48ece36-62e2-4504-bad9-02848725956a",  # archive
        "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",  # object
    }
)


class UnknownValue(Exception):
    """A value a rule needs is not known until apply."""

    def __init__(self, resource: str, path: str):
        super().__init__(f"{resource}: {path} is not known until apply")
        self.path = path


@dataclass(frozen=True)
class Resource:
    type: str
    name: str
    props: Mapping[str, Any]
    protect: bool = False
    urn: str = ""


@dataclass(frozen=True)
class Violation:
    """A stack rule's finding: the message names the resource; ``urn`` points the engine at it."""

    message: str
    urn: str = ""


# The stack itself, as a resource: its outputs are the stack's outputs (a stack rule reads them; the engine finalizes
# them before it analyzes the stack: pulumi/pulumi v3.274.0 pkg/resource/deploy/deployment_executor.go, "Finalize the
# stack outputs" before AnalyzeResources, whose resources carry their outputs, step_generator.go).
ROOT_STACK = "pulumi:pulumi:Stack"


def is_unknown(value: Any) -> bool:
    return isinstance(value, str) and value in UNKNOWN_SENTINELS


def get(props: Any, path: str, default: Any = None, *, owner: str = "") -> Any:
    """The value at dotted ``path`` (``spec.type``; a number indexes a list), ``default`` when any
    part is missing; raises UnknownValue when the value or a container on the way is unknown.
    Keys that hold dots themselves (annotations) are read with ``mapping_of`` instead."""
    value = props
    walked: list[str] = []
    for part in path.split("."):
        if is_unknown(value):
            raise UnknownValue(owner, ".".join(walked) or "(the whole value)")
        walked.append(part)
        if isinstance(value, Mapping):
            if part not in value:
                return default
            value = value[part]
        elif isinstance(value, Sequence) and not isinstance(value, str) and part.isdigit():
            if int(part) >= len(value):
                return default
            value = value[int(part)]
        else:
            return default
    if is_unknown(value):
        raise UnknownValue(owner, path)
    return value


def mapping_of(props: Any, path: str, *, owner: str = "") -> Mapping[str, Any]:
    """The mapping at ``path``, empty when absent or not a mapping."""
    value = get(props, path, {}, owner=owner)
    return value if isinstance(value, Mapping) else {}


def list_of(props: Any, path: str, *, owner: str = "") -> Sequence[Any]:
    value = get(props, path, [], owner=owner)
    return value if isinstance(value, Sequence) and not isinstance(value, str) else []


# Components of the Kubernetes provider that carry whole objects in their inputs. The engine runs
# them as remote components, so a real analyzer sees each object again as a child resource of its
# own type; the offline mocks record only the component and its inputs.
OBJECT_LIST_COMPONENTS = frozenset({"kubernetes:yaml/v2:ConfigGroup"})
HELM_RELEASE_TYPES = frozenset({"kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart"})


@dataclass(frozen=True)
class KubernetesObject:
    kind: str
    api_group: str  # "" for the core group
    body: Mapping[str, Any]
    label: str  # how a message names it: the resource, or the object inside a ConfigGroup

    @property
    def described(self) -> str:
        """The label with the kind in front: ``Deployment admin-server``, ``Namespace team-c in extras``."""
        return self.label if self.label.startswith(f"{self.kind} ") else f"{self.kind} {self.label}"


def kubernetes_objects(resource_type: str, name: str, props: Mapping[str, Any]) -> Iterator[KubernetesObject]:
    """The Kubernetes objects a resource declares: itself, or each object a ConfigGroup lists."""
    # A Kubernetes resource type token names the object's API group and kind: ``kubernetes:apps/v1:Deployment``
    # -> (``apps``, ``Deployment``); other tokens (providers, Helm, yaml components) declare no object themselves.
    parts = resource_type.split(":")
    if len(parts) == 3 and parts[0] == "kubernetes" and "/" in parts[1]:
        group = parts[1].rsplit("/", 1)[0]
        if group not in ("helm.sh", "yaml", "kustomize"):
            yield KubernetesObject(parts[2], "" if group == "core" else group, props, name)
            return
    if resource_type in OBJECT_LIST_COMPONENTS:
        for obj in list_of(props, "objs", owner=name):
            if not isinstance(obj, Mapping):
                continue
            api_version = str(obj.get("apiVersion", ""))
            group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
            kind = str(obj.get("kind", ""))
            obj_name = mapping_of(obj, "metadata", owner=name).get("name", "?")
            yield KubernetesObject(kind, group, obj, f"{kind} {obj_name} in {name}")

"""Generic machinery of the typed stack config, whose blocks (components/stack.py and each concern's config.py) are
frozen pydantic models (``Block``) declaring each field's default, documentation, type and constraints once: reading
Pulumi's raw config into them, saying pydantic's errors as the preview's problems (one mapping, ``_field_problem``)
and collecting every problem before one ``ConfigError`` is raised; the documentation of the settings."""

from __future__ import annotations

import copy
import dataclasses
import difflib
import json
import re
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import annotated_types
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator
from pydantic.alias_generators import to_camel
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

NAMESPACE = "tpu-dynamic-slicing"  # the Pulumi project name: every key is <NAMESPACE>:<key>
B = TypeVar("B", bound=BaseModel)
SECRET = "secret"  # a field's json_schema_extra key: the value is one Pulumi must hold encrypted
SECRET_SETTING: dict[str, Any] = {SECRET: True}  # Field(..., json_schema_extra=SECRET_SETTING)
KIND = "kind"  # a field's json_schema_extra key: what its values are (``kind``)
HINT = "hint"  # a field's json_schema_extra key: how to write a value its pattern refuses


# The text `pulumi config set --path` stores for a scalar setting (``"true"``, ``"16"``, ``"0.5"``), which a setting of
# that type reads as its value: ASCII digits only (str.isdigit would take "٣" and "²", and int() refuses the second).
# The JSON Schema of the stack files admits the same texts (tools/config_table.py).
SCALAR_TEXT: dict[type, str] = {
    bool: r"^([Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee])$",
    int: r"^[0-9]+$",
    float: r"^[0-9]+(\.[0-9]+)?$",
}


class Block(BaseModel):
    """A block of the stack config, or an object inside one: frozen, its keys the camelCase of its fields, no key it
    does not declare. Python code builds one by field name; a stack file is read by key alone (``parse_settings``)."""

    model_config = ConfigDict(
        alias_generator=to_camel,  # a field's key in the stack file: ``node_count`` -> ``nodeCount``
        validate_by_name=True,
        validate_by_alias=True,
        extra="forbid",
        frozen=True,
        strict=True,  # no coercion but the text forms below: "16" for a list, 1 for a string are refused
    )

    @model_validator(mode="before")
    @classmethod
    def _as_written(cls, data: Any) -> Any:
        """What a stack file writes, as the fields take it: a partial object keeps the keys it leaves out from its
        field's default object (``checks: {subslicing: {enabled: false}}`` keeps the check's name and shape), and a
        scalar set by `pulumi config set --path` may arrive as text (``"true"``, ``"16"``)."""
        if not isinstance(data, Mapping):
            return data
        values = dict(data)
        for name, info in cls.model_fields.items():
            key = info.alias if info.alias in values else name
            if key in values:
                values[key] = _as_written(info.annotation, info.default, values[key])
        return values


def _unwrap(tp: Any) -> Any:
    """``X`` of ``X | None`` and of ``Annotated[X, ...]`` (a list's item type keeps its constraints there)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return next(a for a in typing.get_args(tp) if a is not type(None))
    if typing.get_origin(tp) is typing.Annotated:
        return typing.get_args(tp)[0]
    return tp


def _as_written(tp: Any, default: Any, value: Any) -> Any:
    tp = _unwrap(tp)
    if isinstance(default, BaseModel) and isinstance(value, Mapping):
        return merged(default.model_dump(by_alias=True), value)
    if typing.get_origin(tp) is list and isinstance(value, list):
        (item,) = typing.get_args(tp)
        return [_as_written(item, None, v) for v in value]
    text_form = SCALAR_TEXT.get(tp) if isinstance(tp, type) else None
    if isinstance(value, str) and text_form and re.fullmatch(text_form, value):
        return value.lower() == "true" if tp is bool else tp(value)
    return value


def merged(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``override`` laid over it, mapping into mapping: a key of ``override`` wins, below its own keys."""
    result = dict(base)
    for key, value in override.items():
        below = result.get(key)
        result[key] = merged(below, value) if isinstance(value, Mapping) and isinstance(below, Mapping) else value
    return result


def kind(noun: str) -> dict[str, Any]:
    """A setting's ``json_schema_extra`` naming what its values are (``Cloud NAT log filter``): a value outside them
    is said to be "not a <noun>"."""
    return {KIND: noun}


def form(noun: str, hint: str) -> dict[str, Any]:
    """A text setting's ``json_schema_extra`` beside its ``pattern`` (or a type that declares one): a value the
    pattern refuses is said to be "not a <noun>", with ``hint`` as the fix. Its ``examples`` give the value that
    stands in for a failed one while the rules across settings run (``_placeholder``)."""
    return {KIND: noun, HINT: hint}


# --- Errors ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Problem:
    key: str
    what: str
    fix: str

    def __str__(self) -> str:
        return f"{self.key}: {self.what} ({self.fix})"


class ConfigError(ValueError):
    """Every problem of a stack config, reported together."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(
            f"Stack config has {len(problems)} problem(s) (keys in namespace '{NAMESPACE}'; "
            f"fix with `pulumi config set --path <key> <value>`):\n{lines}"
        )


class Problems:
    """Collects problems; a key that already failed to parse gets no follow-on complaints."""

    def __init__(self) -> None:
        self.items: list[Problem] = []
        self.unparsed: set[str] = set()

    def add(self, key: str, what: str, fix: str) -> None:
        if key not in self.unparsed:
            self.items.append(Problem(key, what, fix))

    def unparsable(self, key: str, what: str, fix: str) -> None:
        self.add(key, what, fix)
        self.unparsed.add(key)

    def require_pinned(self, key: str, image: str, fix: str) -> bool:
        """Whether the image a setting names is pinned; if not, ``image_pin_problem`` says why, under ``key``."""
        if problem := image_pin_problem(image):
            named = image_name_problem(image) is None
            self.add(key, problem, fix if named else "write the image's name as its registry serves it, in lowercase")
        return problem is None


# --- Parsing: pydantic's errors as the preview's problems ----------------------------------
def parse_settings(root: type[B], raw: Mapping[str, Any], problems: Problems) -> B | None:
    """``raw`` (keys as the stack file writes them) as the block ``root``, each problem of a field recorded under its
    key. With such problems it still gives a block, in which each value that failed is its setting's default (or a
    placeholder where it has none), so that the rules across settings run on it and report with them, skipping the
    keys that failed (``Problems.unparsable``). None only where no such block can be made."""
    data: Any = raw
    for attempt in range(5):
        try:
            return root.model_validate(data, by_name=False)
        except ValidationError as error:
            errors = error.errors(include_url=False)
            if attempt == 0:
                for problem in (_field_problem(root, error) for error in errors):
                    problems.unparsable(problem.key, problem.what, problem.fix)
            data = _repaired(root, data, errors)
    return None


def _field_problem(root: type[BaseModel], error: ErrorDetails) -> Problem:
    """A pydantic error of ``root``'s fields as the preview says it: the one mapping of error types to (what, fix)."""
    loc, error_type, value = error["loc"], error["type"], error.get("input")
    key = ""  # the key the user sets: ``tpu.pools[0].nodeCount``
    for part in loc:
        key = f"{key}[{part}]" if isinstance(part, int) else join(key, str(part))
    model, info, tp = field_at(root, loc)
    shown = "the value given" if is_secret(info) else repr(value)
    expected = _describe(tp)
    if error_type == "extra_forbidden":
        known = [f.alias or name for name, f in model.model_fields.items()] if model else []
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        return Problem(
            key, "is not a known setting", f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(known)}"
        )
    if error_type == "missing":
        return Problem(key, "is required", f"set {expected}")
    if error_type in ("model_type", "model_attributes_type", "dict_type"):
        return Problem(key, "must be an object", "write a YAML mapping of its keys")
    if error_type == "list_type":
        return Problem(key, f"must be {expected}", "write a YAML list")
    noun = _extra(info, KIND)
    article = "an" if noun[:1].lower() in ("a", "e", "i", "o", "u") else "a"
    if error_type == "literal_error":
        return Problem(key, f"{shown} is not {f'{article} {noun}' if noun else expected}", f"use {expected}")
    if error_type in ("string_pattern_mismatch", "predicate_failed"):
        return Problem(key, f"{shown} is not {article} {noun}", _extra(info, HINT))
    if error_type == "string_too_long":
        limit = error.get("ctx", {})["max_length"]
        return Problem(key, f"{shown} is {len(value)} characters; the limit is {limit}", f"use at most {limit}")
    if error_type == "too_long":
        limit = error.get("ctx", {})["max_length"]
        return Problem(key, f"lists {len(value)} items; the limit is {limit}", f"list at most {limit}")
    if error_type in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        bounds = _bounds(info)
        what = f"is outside {bounds[7:]}" if bounds.startswith("within ") else f"is not {bounds}"
        return Problem(key, f"{shown} {what}", f"set a number {bounds}")
    if error_type.endswith(("_type", "_parsing")) or error_type == "int_from_float":
        return Problem(key, f"{shown} is not {expected}", f"set {expected}")
    return Problem(key, error["msg"], "see docs/configuration.md")  # an error type no setting of ours raises yet


def field_at(root: type[BaseModel], loc: tuple[str | int, ...]) -> tuple[type[BaseModel] | None, FieldInfo | None, Any]:
    """Along ``loc``: the model its last key is looked up in, that key's field (None for a key it does not declare),
    and the type of the value there."""
    tp: Any = root
    model: type[BaseModel] | None = None
    info: FieldInfo | None = None
    for part in loc:
        tp = _unwrap(tp)
        if isinstance(part, int):
            tp = typing.get_args(tp)[0] if typing.get_origin(tp) is list else Any
            info = next((m for m in getattr(tp, "__metadata__", ()) if isinstance(m, FieldInfo)), info)
            continue
        if not (isinstance(tp, type) and issubclass(tp, BaseModel)):
            return model, None, Any
        model = tp
        info = next((f for name, f in tp.model_fields.items() if part in (f.alias, name)), None)
        if info is None:
            return model, None, Any
        tp = info.annotation
    return model, info, tp


_NAMES = {str: ("a string", "strings"), int: ("an integer", "integers"), float: ("a number", "numbers")}


def _describe(tp: Any, plural: bool = False) -> str:
    tp = _unwrap(tp)
    if typing.get_origin(tp) is typing.Literal:
        choices = [str(choice) for choice in typing.get_args(tp)]
        return choices[0] if len(choices) == 1 else "one of " + ", ".join(choices)
    if typing.get_origin(tp) is list:
        return f"a list of {_describe(typing.get_args(tp)[0], plural=True)}"
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return "objects" if plural else "an object"
    if tp is bool:
        return "true or false"
    names = _NAMES.get(tp, ("a value", "values"))
    return names[1] if plural else names[0]


_BOUND_WORDS: dict[type, Callable[[Any], str]] = {
    annotated_types.Gt: lambda c: f"above {c.gt}",
    annotated_types.Ge: lambda c: f"{c.ge} or more",
    annotated_types.Lt: lambda c: f"below {c.lt}",
    annotated_types.Le: lambda c: f"at most {c.le}",
}


def _bounds(info: FieldInfo | None) -> str:
    """A numeric setting's range, in words: ``within 1300-8896``, ``above 0 and at most 1``, ``1 or more``."""
    constraints = {type(c): c for c in (info.metadata if info else [])}
    ge, le = constraints.get(annotated_types.Ge), constraints.get(annotated_types.Le)
    if isinstance(ge, annotated_types.Ge) and isinstance(le, annotated_types.Le):
        return f"within {ge.ge}-{le.le}"
    return " and ".join(_BOUND_WORDS[kind](c) for kind, c in constraints.items() if kind in _BOUND_WORDS)


def _repaired(root: type[BaseModel], data: Any, errors: Iterable[ErrorDetails]) -> Any:
    """``data`` with each value that failed taken out (so its default stands), or a placeholder where the setting has
    no default, and each unknown key dropped."""
    data = copy.deepcopy(data)
    for error in errors:
        *path, last = error["loc"]
        parent = dict(walk(data)).get(tuple(str(part) for part in path))
        _, info, tp = field_at(root, error["loc"])
        if isinstance(parent, list) and isinstance(last, int) and last < len(parent):
            parent[last] = _placeholder(info, tp)
        elif isinstance(parent, dict):
            if error["type"] == "extra_forbidden" or (info is not None and not info.is_required()):
                parent.pop(last, None)
            else:
                parent[last] = _placeholder(info, tp)
    return data


def walk(value: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every (path, value) pair below ``value``, containers included, depth first."""
    yield path, value
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from walk(item, (*path, str(key)))
    elif isinstance(value, Sequence) and not isinstance(value, str):
        for index, item in enumerate(value):
            yield from walk(item, (*path, str(index)))


def _placeholder(info: FieldInfo | None, tp: Any) -> Any:
    """A value for a required setting that failed, so that the rules across settings still run: its first example
    where it declares one (a setting with a pattern does: the empty text need not match it), else its type's zero (a
    required setting is a string or a number)."""
    if info is not None and info.examples:
        return info.examples[0]
    tp = _unwrap(tp)
    if typing.get_origin(tp) is typing.Literal:
        return typing.get_args(tp)[0]
    return {str: "", int: 0, float: 0.0, bool: False}.get(tp)


def is_secret(info: FieldInfo | None) -> bool:
    return bool(_extra(info, SECRET))


def _extra(info: FieldInfo | None, name: str) -> str:
    """A field's ``json_schema_extra`` entry ``name`` (KIND, HINT, SECRET), "" where it has none."""
    extra = info.json_schema_extra if info else None
    return str(extra.get(name, "")) if isinstance(extra, dict) and extra.get(name) else ""


def join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


# A Kubernetes object or namespace name this program takes from a setting: a DNS-1123 label.
K8sName = Annotated[
    str,
    StringConstraints(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63),
    Field(
        json_schema_extra=form(
            "Kubernetes name", "use lowercase letters, digits and hyphens, at most 63: a DNS-1123 label"
        ),
        examples=["example"],
    ),
]


# A Kubernetes ServiceAccount the stack makes in a namespace it makes: not `default`, which Kubernetes makes in every
# namespace as it appears (kube-controller-manager's ServiceAccount controller, kubernetes/kubernetes
# pkg/controller/serviceaccount/serviceaccounts_controller.go), so the stack's own would be refused as already existing
# halfway through the `up` (the provider creates, never adopts: components/gcp/cluster.py UPSERT_EXISTING_ENV).
ServiceAccountName = Annotated[
    K8sName,
    annotated_types.Predicate(lambda name: name != "default"),
    Field(
        json_schema_extra=form(
            "Kubernetes name of a ServiceAccount of the stack's own",
            "use lowercase letters, digits and hyphens, at most 63 (a DNS-1123 label), other than `default`, which "
            "Kubernetes makes in every namespace: the stack's own would be refused as already existing",
        )
        | {"not": {"const": "default"}},  # the JSON Schema of the stack files says it too
        examples=["example"],
    ),
]


QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(m|k|M|G|T|Ki|Mi|Gi|Ti)?$")
_QUANTITY_UNITS = {None: 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_QUANTITY_UNITS |= {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def parse_quantity(text: str) -> float:
    """A Kubernetes quantity (``220``, ``500m``, ``850Gi``) as a number; ValueError otherwise."""
    match = QUANTITY.match(str(text))
    if not match:
        raise ValueError(f"{text!r} is not a Kubernetes quantity such as 220, 500m or 850Gi")
    return float(match.group(1)) * _QUANTITY_UNITS[match.group(2)]


# One pin rule, held twice: by the config blocks at preview, under the key that sets a version (ExactVersion), and by
# the policy pack on every Helm release a stack registers (policy/charts.py).
EXACT_VERSION = re.compile(r"^v?[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$")
# A setting that pins a release: a full version (no range, no floating tag such as v0 or latest).
ExactVersion = Annotated[
    str,
    StringConstraints(pattern=EXACT_VERSION.pattern),
    Field(
        json_schema_extra=form("exact version", "pin a release by its full version, MAJOR.MINOR.PATCH"),
        examples=["0.0.0"],
    ),
]


# A secret version as Secret Manager names it, the form the Secret Manager add-on's SecretProviderClass takes
# (GoogleCloudPlatform/secrets-store-csi-driver-provider-gcp v1.15.0 config/config.go, Secret.ResourceName:
# projects/*/secrets/*/versions/*) and Artifact Registry's upstream credentials take (pulumi-gcp 10.2.0,
# artifactregistry.Repository remote_repository_config.upstream_credentials.username_password_credentials.
# password_secret_version: "projects/{project}/secrets/{secret}/versions/{version}"): a secret ID of at most 255
# letters, digits, hyphens and underscores (Secret Manager API reference, CreateSecretRequest.secret_id), and a
# version number (they count from 1) or the alias latest.
SECRET_VERSION = re.compile(
    r"projects/(?P<project>[^/]+)/secrets/(?P<secret>[A-Za-z0-9_-]{1,255})/versions/(?P<version>[1-9][0-9]*|latest)"
)


def secret_of_version(version: str) -> str:
    """The secret of a secret version (``projects/<p>/secrets/<s>``): what its readers are granted on, whatever the
    version they read."""
    return version.partition("/versions/")[0]


FLOATING_TAGS = frozenset({"latest", "nightly", "main", "master", "stable", "dev"})
IMAGE_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
# What makes a tag a pin: a full release version, or a build date (``nightly-20260430-18ed615``).
_RELEASE_VERSION = re.compile(r"(?<![0-9])[0-9]+\.[0-9]+\.[0-9]+(?![0-9])")
# A tag as Docker's reference grammar writes it (distribution/reference reference.go: tag := /[\w][\w.-]{0,127}/), in
# Go's regexp, where \w is ASCII: [0-9A-Za-z_]. Python's \w takes any Unicode letter or digit ("v0.26.0-é" passed), and
# its `$` a final newline: the pattern is ASCII and matched whole (fullmatch), as is IMAGE_DIGEST.
_TAG = re.compile(r"[0-9A-Za-z_][0-9A-Za-z_.-]{0,127}")
# A name as Docker's reference grammar writes it (distribution/reference@00a09fa3 regexp.go, namePat): an optional
# registry (host names' labels or a bracketed IPv6 address, and a port), then path components of lowercase letters and
# digits joined by one '.', one or two '_' or any '-', separated by '/'; at most 255 characters (reference.go,
# NameTotalLengthMax). The kubelet parses each container's image so (kubernetes pkg/util/parsers/parsers.go,
# ParseImageName: ParseNormalizedNamed, which says "repository name must be lowercase") and starts no pod whose image
# it refuses (InvalidImageName).
_REGISTRY_NAME = re.compile(
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:]+\])"
    r"(?::[0-9]+)?"
)
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE_PATH = re.compile(rf"{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*")
_BUILD_DATE = re.compile(r"(?<![0-9])20[0-9]{2}-?(?:0[1-9]|1[0-2])-?(?:0[1-9]|[12][0-9]|3[01])(?![0-9])")


def image_unpinned_reason(image: str) -> str | None:
    """Why the image reference ``image`` can change under the same name (and what a running stack pulls, without any
    diff in review), or None when it is pinned: by a sha256 digest, or by a tag that names a release version (x.y.z)
    or a build date. The one rule of the config blocks and of the policy pack."""
    if not image:
        return "it is empty; name an image with a dated tag or a digest"
    if problem := image_name_problem(image):
        return problem
    reference = ImageReference.parse(image)
    if "@" in image:
        digest = reference.digest
        return None if IMAGE_DIGEST.fullmatch(digest) else f"its digest {digest!r} is not sha256:<64 hex>"
    tag = reference.tag
    if not tag:
        return "its tag is empty" if reference.name.endswith(":") else "it has no tag, which means latest"
    if not _TAG.fullmatch(tag):
        return f"its tag {tag!r} is not a tag: letters, digits, '_', '.' and '-', at most 128"
    if tag in FLOATING_TAGS:
        return f"it uses the floating tag {tag!r}"
    if _RELEASE_VERSION.search(tag) or _BUILD_DATE.search(tag):
        return None
    return f"the tag {tag!r} names no release version (x.y.z) or build date, so it can move"


def image_name_problem(image: str) -> str | None:
    """Why the kubelet would refuse the name of the image reference ``image``, or None; an empty image or tag is
    ``image_unpinned_reason``'s to say."""
    name = ImageReference.parse(image).name.removesuffix(":")  # `python:` is an empty tag, not a name
    if not name:
        return None
    registry, _, path = ImageReference(name).qualified_name.partition("/")  # Docker's split of registry and path
    if len(name) <= 255 and _REGISTRY_NAME.fullmatch(registry) and _IMAGE_PATH.fullmatch(path):
        return None
    return (
        f"its name {name!r} is not an image name: after the registry, lowercase letters and digits joined by '.', "
        "'_', '__' or '-', in components separated by '/', at most 255 characters in all (the kubelet refuses any "
        "other: InvalidImageName)"
    )


def image_pin_problem(image: str) -> str | None:
    """``image_unpinned_reason`` as a config problem's sentence."""
    if problem := image_name_problem(image):
        return f"{image!r} is not an image reference the nodes can pull: {problem}"
    reason = image_unpinned_reason(image)
    return reason and f"{image!r} is not pinned: {reason}"


# Docker's rules for a reference without a registry (distribution/reference normalize.go): the first path
# component is a registry only when it holds a `.` or a `:` or is `localhost`; otherwise the image is on Docker
# Hub, and a one-component name is in its `library/` namespace (`python` is docker.io/library/python). A name written
# with Docker Hub's domain is normalized the same way: its legacy domain index.docker.io is docker.io, and
# docker.io/python is docker.io/library/python (splitDockerDomain, distribution/reference@4ca14034 normalize.go).
DOCKER_HUB = "docker.io"
_DOCKER_HUB_LEGACY = "index.docker.io"


@dataclass(frozen=True)
class ImageReference:
    """``name[:tag][@digest]``, split. ``name`` keeps the registry as written (none for Docker Hub)."""

    name: str
    tag: str = ""
    digest: str = ""

    @classmethod
    def parse(cls, image: str) -> ImageReference:
        reference, _, digest = image.partition("@")
        last = reference.rpartition("/")[2]
        tag = last.partition(":")[2] if ":" in last else ""  # a registry port is not a tag
        name = reference[: len(reference) - len(tag) - 1] if tag else reference
        return cls(name, tag, digest)

    @property
    def qualified_name(self) -> str:
        """The name with its registry, as Docker normalizes it: ``tpuongke/kueue-slice-controller`` ->
        docker.io/tpuongke/kueue-slice-controller, ``docker.io/python`` and ``index.docker.io/library/python`` ->
        docker.io/library/python (what a remote repository of Docker Hub serves, and where the mirror holds it)."""
        registry, _, path = self.name.partition("/")
        if not path or not ("." in registry or ":" in registry or registry == "localhost"):
            registry, path = DOCKER_HUB, self.name
        elif registry == _DOCKER_HUB_LEGACY:
            registry = DOCKER_HUB
        if registry == DOCKER_HUB and "/" not in path:
            path = f"library/{path}"
        return f"{registry}/{path}"

    @property
    def registry(self) -> str:
        """The registry the image comes from: ``docker.io`` for Docker Hub's short names."""
        return self.qualified_name.partition("/")[0]

    @property
    def path(self) -> str:
        """The image's name within its registry: ``library/python``, ``vllm/vllm-tpu``, ``jobset/jobset``."""
        return self.qualified_name.partition("/")[2]

    @property
    def tag_and_digest(self) -> str:
        """What follows the name: ``:v1.2.3``, ``@sha256:...`` or ``:v1.2.3@sha256:...`` (a chart's tag value)."""
        return (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")

    def __str__(self) -> str:
        return self.name + self.tag_and_digest


def written_release_image(images: Iterable[str], repository: str, tag: str) -> str | None:
    """The image of ``images`` (each written in full, a digest once Renovate pins it) that is ``repository`` at
    ``tag``, or None: a release's own image as the program writes it down."""
    references = ((image, ImageReference.parse(image)) for image in images)
    return next((image for image, ref in references if (ref.name, ref.tag) == (repository, tag)), None)


@dataclass(frozen=True)
class PullPath:
    """Where the nodes pull each image from: the one rewrite of every image the stack runs, in its objects, in its
    charts' values, in `make bench`'s Job and in `make images`' listing. Neither set: each image from its own
    registry, as written (NO_PULL_PATH).

    ``mirror`` (images.mirror, a repository the organisation fills): ``<mirror>/<registry>/<path>`` with the same tag
    and digest; the whole qualified name is kept, so images of different registries never meet in one name, and
    `crane copy <image> <mirrored>` keeps the digest (it copies the manifest, every platform's index, byte for byte).

    ``remotes`` (images.pullThrough): registry -> the Artifact Registry remote repository that proxies it; an image of
    that registry is pulled as ``<repository>/<path>``, its path as the registry serves it (``path``), which is the
    path a remote repository asks its upstream for (a Docker Hub remote repository serves ubuntu:24.04 as
    ``<repository>/library/ubuntu:24.04``: hail-is/hail dev-docs/services/docker-hub-cache.md at 4ec2e9e5, from
    running one). A registry without one (Google's: Artifact Registry, gcr.io) keeps the image as written.
    """

    mirror: str = ""
    remotes: tuple[tuple[str, str], ...] = ()  # (registry, repository), each registry once

    def image(self, image: str) -> str:
        if not image:
            return image
        reference = ImageReference.parse(image)
        if self.mirror:
            return str(dataclasses.replace(reference, name=f"{self.mirror}/{reference.qualified_name}"))
        repository = dict(self.remotes).get(reference.registry)
        return str(dataclasses.replace(reference, name=f"{repository}/{reference.path}")) if repository else image


NO_PULL_PATH = PullPath()  # each image from its own registry


def secrets_in_plain_text(config: BaseModel, secret_blocks: set[str]) -> list[Problem]:
    """Settings documented as secret that hold a value outside a secret config key. Pulumi keeps secrecy per
    top-level key: ``pulumi config set --secret --path serving.hfToken`` encrypts the value and marks the whole
    ``serving`` key secret, and the engine tells the program which keys are; a value typed in plain text is neither."""
    problems = []
    for path, value in walk(config.model_dump(by_alias=True)):
        key = ".".join(path)
        if is_secret(field_at(type(config), path)[1]) and value and path[0] not in secret_blocks:
            problems.append(
                Problem(
                    key,
                    "is in plain text in the stack file, where everyone who can read the repository sees it",
                    f"set it with `pulumi config set --secret --path {key} <value>` (it is then stored encrypted)",
                )
            )
    return problems


# What a credential looks like, whichever key it was typed under: a message about a bad value never echoes one.
# The shapes of gitleaks' rules (gitleaks/gitleaks b58d3f10, v8.30.0-27, config/gitleaks.toml, ids in brackets),
# written here as plain patterns: a Hugging Face token [huggingface-access-token], a Google API key [gcp-api-key], a
# PEM private key, as in a service account's JSON key [private-key], GitHub [github-pat, github-fine-grained-pat,
# github-oauth] and GitLab [gitlab-pat] tokens, an AWS access key [aws-access-token], a JWT [jwt], a Slack bot token
# [slack-bot-token]; and Google's OAuth access tokens, which start `ya29.` (developers.google.com/identity/protocols/
# oauth2, "Token types", read 2026-12-04).
CREDENTIAL_PATTERNS = tuple(
    re.compile(pattern)
    for pattern in (
        r"hf_[A-Za-z]{30,}",
        r"AIza[0-9A-Za-z_-]{35}",
        r"-----BEGIN[ A-Z0-9_-]*PRIVATE KEY-----[^\x00]*?(?:-----END[ A-Z0-9_-]*PRIVATE KEY-----|$)",
        r"(?:ghp|gho|ghu|ghs|ghr)_[0-9A-Za-z]{36}",
        r"github_pat_[0-9A-Za-z_]{60,}",
        r"glpat-[0-9A-Za-z_-]{20,}",
        r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}",
        r"ey[A-Za-z0-9_-]{17,}\.ey[A-Za-z0-9_-]{17,}\.[A-Za-z0-9_-]*",
        r"xox[abp]-[0-9A-Za-z-]{10,}",
        r"ya29\.[0-9A-Za-z_-]{20,}",
    )
)
# A key named for a credential (`password`, `dockerHubToken`, `apiKey`...), known setting or not: its value is one,
# whatever it looks like.
CREDENTIAL_KEY = re.compile(r"(?i)(password|passwd|token|secret|api_?key|private_?key|credentials?)$")
CREDENTIAL_SHOWN = "[redacted: it looks like a credential]"
SECRET_SHOWN = "[secret]"


def redacted(problems: list[Problem], raw: Mapping[str, Any], secret_blocks: set[str]) -> list[Problem]:
    """The problems as the preview may show them. The value of each key inside a secret top-level key is replaced by
    ``[secret]``: the program cannot tell which leaf of a secret key was encrypted (secrets_in_plain_text), so no
    message about a key inside one echoes that key's value, whatever it is, and no message quotes a text inside one. Then every credential-looking text is
    taken out: each value of ``raw`` under a key named for a credential, and anything ``CREDENTIAL_PATTERNS`` match,
    wherever it appears in a message."""
    values = dict(walk(raw))  # path -> the raw value there
    # A message may quote another key's value (checks.subslicing.shape quotes tpu.sliceShapes): every text inside a
    # secret top-level key is taken out where a message quotes it (repr, as they all do), longest first.
    quoted = sorted(
        {repr(v) for path, v in values.items() if path and path[0] in secret_blocks and isinstance(v, str) and v},
        key=len,
        reverse=True,
    )
    # (a list item's path part is its index, which no credential key matches)
    under_keys = (v for path, v in values.items() if any(CREDENTIAL_KEY.search(key) for key in path))
    scalars = {str(v) for v in under_keys if isinstance(v, (str, int, float)) and not isinstance(v, bool)}
    named = sorted((v for v in scalars if v), key=len, reverse=True)

    def clean(text: str, secret: list[str]) -> str:
        for value in secret:
            text = text.replace(value, SECRET_SHOWN)
        for value in named:
            text = text.replace(repr(value), CREDENTIAL_SHOWN).replace(value, CREDENTIAL_SHOWN)
        for pattern in CREDENTIAL_PATTERNS:
            text = pattern.sub(CREDENTIAL_SHOWN, text)
        return text

    shown = []
    for problem in problems:
        # the raw value at the problem's key: ``tpu.pools[0].name`` is at the path tpu, pools, 0, name
        path = tuple(re.findall(r"[^.\[\]]+", problem.key))
        value = values.get(path) if path and path[0] in secret_blocks else None
        scalar = isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value)
        secret = ([repr(value), str(value)] if scalar else []) + quoted
        shown.append(Problem(problem.key, clean(problem.what, secret), clean(problem.fix, secret)))
    return shown


# --- Documentation ---------------------------------------------------------------------
REQUIRED = "(required)"
REQUIRED_IN_ITEM = "(required in each item)"
REQUIRED_IF_SET = "(required when set)"


def documented_settings(
    cls: type[BaseModel], prefix: str = "", defaults: Any = None, required: str = REQUIRED
) -> list[tuple[str, str, str]]:
    """(key, default, description) for every setting of ``cls``, in schema order, for the config table of
    docs/configuration.md. A field without a default of its own shows its parent's default for it
    (``checks.subslicing.name`` is ``subslice-check``: a partial object keeps the keys it leaves out); only a field no
    default covers shows ``required``: at the top, in each item of a list, or when an optional object is set."""
    rows = []
    for name, info in cls.model_fields.items():
        key = join(prefix, info.alias or name)
        tp = _unwrap(info.annotation)
        optional = tp is not info.annotation
        default = getattr(defaults, name) if defaults is not None else None if info.is_required() else info.default
        if isinstance(tp, type) and issubclass(tp, BaseModel) and not optional:
            rows.extend(documented_settings(tp, key, default, required))
            continue
        shown = required if defaults is None and info.is_required() else _render_default(default)
        rows.append((key, shown, info.description or ""))
        item = typing.get_args(tp)[0] if typing.get_origin(tp) is list else tp
        if isinstance(item, type) and issubclass(item, BaseModel):
            in_list = item is not tp
            rows.extend(
                documented_settings(
                    item, key + ("[]" if in_list else ""), None, REQUIRED_IN_ITEM if in_list else REQUIRED_IF_SET
                )
            )
    return rows


def _render_default(value: Any) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, list):
        value = [v.model_dump(by_alias=True) if isinstance(v, BaseModel) else v for v in value]
    return json.dumps(value) if not isinstance(value, str) else (value or '""')

"""Generic machinery of the typed stack config: documented settings, problems, parsing.

The schema itself (components/stack.py and the config.py of each concern) is plain
frozen dataclasses whose fields are declared with :func:`setting`; this module turns Pulumi's
raw config into them and collects every problem before one :class:`ConfigError` is raised.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

NAMESPACE = "tpu-dynamic-slicing"  # the Pulumi project name: every key is <NAMESPACE>:<key>


def setting(default: Any = dataclasses.MISSING, doc: str = "", secret: bool = False) -> Any:
    """A config field with its documentation; lists and objects get fresh default copies."""
    metadata = {"doc": doc, "secret": secret}
    if isinstance(default, (list, dict)) or dataclasses.is_dataclass(default):
        frozen = default
        return field(default_factory=lambda: _copy(frozen), metadata=metadata)
    return field(default=default, metadata=metadata)


def _copy(value: Any) -> Any:
    if isinstance(value, list):
        return [_copy(v) for v in value]
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value)
    return value


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


# --- Parsing ---


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _placeholder(tp: Any) -> Any:
    return {str: "", int: 0, float: 0.0, bool: False}.get(tp)


def _describe(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is list:
        return f"a list of {_describe(typing.get_args(tp)[0])}s"
    if dataclasses.is_dataclass(tp):
        return "an object"
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false"}[tp]


def coerce(tp: Any, value: Any, key: str, secret: bool, problems: Problems, default: Any = None) -> Any:
    """Convert one raw value to ``tp``; on failure record it and return a placeholder.

    ``default`` is the field's default object, if any: keys a partial object leaves out keep
    their values from it (``checks: {subslicing: {enabled: false}}`` keeps the rest).
    """
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = next(a for a in typing.get_args(tp) if a is not type(None))
        return None if value is None else coerce(inner, value, key, secret, problems, default)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return parse_object(tp, value, key, problems, default)
    if origin is list:
        (item_type,) = typing.get_args(tp)
        if not isinstance(value, list):
            problems.unparsable(key, f"must be {_describe(tp)}", "write a YAML list")
            return []
        return [coerce(item_type, item, f"{key}[{i}]", secret, problems) for i, item in enumerate(value)]
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.isdigit():
            return int(value)
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str) and re.fullmatch(r"[0-9]+(\.[0-9]+)?", value):
            return float(value)
    elif tp is str and isinstance(value, str):
        return value
    shown = "the value given" if secret else repr(value)
    problems.unparsable(key, f"{shown} is not {_describe(tp)}", f"set {_describe(tp)}")
    return _placeholder(tp)


def parse_object(cls: type, raw: Any, prefix: str, problems: Problems, default: Any = None) -> Any:
    hints = typing.get_type_hints(cls)
    if not isinstance(raw, Mapping):
        problems.unparsable(prefix, "must be an object", "write a YAML mapping of its keys")
        return cls(**{f.name: _placeholder(hints[f.name]) for f in dataclasses.fields(cls) if _is_required(f)})
    fields_by_key = {camel(f.name): f for f in dataclasses.fields(cls)}
    for key in raw:
        if key not in fields_by_key:
            close = difflib.get_close_matches(str(key), list(fields_by_key), n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(fields_by_key)}"
            problems.add(join(prefix, key), "is not a known setting", hint)
    values = {}
    for key, f in fields_by_key.items():
        path = join(prefix, key)
        inherited = getattr(default, f.name) if default is not None else _field_default(f)
        if key in raw:
            values[f.name] = coerce(hints[f.name], raw[key], path, f.metadata.get("secret", False), problems, inherited)
        elif default is not None:
            values[f.name] = inherited
        elif _is_required(f):
            problems.unparsable(path, "is required", f"set {_describe(hints[f.name])}")
            values[f.name] = _placeholder(hints[f.name])
    return cls(**values)


def _field_default(f: dataclasses.Field[Any]) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None if f.default is dataclasses.MISSING else f.default


def _is_required(f: dataclasses.Field[Any]) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def snake(key: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), key)


_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def is_k8s_name(value: str) -> bool:
    return bool(_DNS_LABEL.match(value)) and len(value) <= 63


QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(m|k|M|G|T|Ki|Mi|Gi|Ti)?$")
_QUANTITY_UNITS = {
    None: 1,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}


def parse_quantity(text: str) -> float:
    """A Kubernetes quantity (``220``, ``500m``, ``850Gi``) as a number; ValueError otherwise."""
    match = QUANTITY.match(str(text))
    if not match:
        raise ValueError(f"{text!r} is not a Kubernetes quantity such as 220, 500m or 850Gi")
    return float(match.group(1)) * _QUANTITY_UNITS[match.group(2)]


# One pin rule, held twice: by the config blocks at preview, under the key that sets a version, and by the policy
# pack on every Helm release a stack registers (policy/charts.py).
EXACT_VERSION = re.compile(r"^v?[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$")


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


FLOATING_TAGS = frozenset({"latest", "nightly", "main", "master", "stable", "dev"})
IMAGE_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
# What makes a tag a pin: a full release version, or a build date (``nightly-20260430-18ed615``).
_RELEASE_VERSION = re.compile(r"(?<![0-9])[0-9]+\.[0-9]+\.[0-9]+(?![0-9])")
_BUILD_DATE = re.compile(r"(?<![0-9])20[0-9]{2}-?(?:0[1-9]|1[0-2])-?(?:0[1-9]|[12][0-9]|3[01])(?![0-9])")


def image_unpinned_reason(image: str) -> str | None:
    """Why the image reference ``image`` can change under the same name, or None when it is pinned:
    by a sha256 digest, or by a tag that names a release version (x.y.z) or a build date. A moving
    tag would change what a running stack pulls without any diff in review. The one rule of the
    config blocks and of the policy pack."""
    if not image:
        return "it is empty; name an image with a dated tag or a digest"
    reference, _, digest = image.partition("@")
    if digest:
        return None if IMAGE_DIGEST.match(digest) else f"its digest {digest!r} is not sha256:<64 hex>"
    last = reference.rsplit("/", 1)[-1]  # a registry port is not a tag
    if ":" not in last:
        return "it has no tag, which means latest"
    tag = last.rpartition(":")[2]
    if tag in FLOATING_TAGS:
        return f"it uses the floating tag {tag!r}"
    if _RELEASE_VERSION.search(tag) or _BUILD_DATE.search(tag):
        return None
    return f"the tag {tag!r} names no release version (x.y.z) or build date, so it can move"


def image_pin_problem(image: str) -> str | None:
    """``image_unpinned_reason`` as a config problem's sentence."""
    reason = image_unpinned_reason(image)
    return None if reason is None else f"{image!r} is not pinned: {reason}"


# Docker's rules for a reference without a registry (distribution/reference normalize.go): the first path
# component is a registry only when it holds a `.` or a `:` or is `localhost`; otherwise the image is on Docker
# Hub, and a one-component name is in its `library/` namespace (`python` is docker.io/library/python).
DOCKER_HUB = "docker.io"


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
        """The name with its registry: ``tpuongke/kueue-slice-controller`` -> docker.io/tpuongke/kueue-slice-controller."""
        first, _, rest = self.name.partition("/")
        if rest and ("." in first or ":" in first or first == "localhost"):
            return self.name
        return f"{DOCKER_HUB}/{self.name}" if rest else f"{DOCKER_HUB}/library/{self.name}"

    @property
    def registry(self) -> str:
        """The registry the image comes from: ``docker.io`` for Docker Hub's short names."""
        return self.qualified_name.partition("/")[0]

    @property
    def path(self) -> str:
        """The image's name within its registry: ``library/python``, ``vllm/vllm-tpu``, ``jobset/jobset``."""
        return self.qualified_name.partition("/")[2]

    def with_name(self, name: str) -> ImageReference:
        return ImageReference(name, self.tag, self.digest)

    def with_digest(self, digest: str) -> ImageReference:
        return ImageReference(self.name, self.tag, digest)

    @property
    def tag_and_digest(self) -> str:
        """What follows the name: ``:v1.2.3``, ``@sha256:...`` or ``:v1.2.3@sha256:...`` (a chart's tag value)."""
        return (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")

    def __str__(self) -> str:
        return self.name + self.tag_and_digest


def written_release_image(images: Iterable[str], repository: str, tag: str) -> str | None:
    """The image of ``images`` (each written in full, a digest once Renovate pins it) that is ``repository`` at
    ``tag``, or None: a release's own image as the program writes it down."""
    for image in images:
        reference = ImageReference.parse(image)
        if (reference.name, reference.tag) == (repository, tag):
            return image
    return None


def release_image_problems(image: str, name: str, tag: str, release: str) -> list[str]:
    """An override of an image the stack takes from a release (a chart's controller, the llm-d router's endpoint
    picker): the image named ``name`` (its last path component; a copy in another registry keeps it) at the
    release's tag ``tag``, with the digest that is the point of an override. ``release`` names it in messages."""
    if reason := image_unpinned_reason(image):
        return [f"{image!r} is not pinned: {reason}"]
    reference = ImageReference.parse(image)
    problems = []
    if reference.name.rsplit("/", 1)[-1] != name:
        problems.append(f"{image!r} is not {name}, the image {release} runs")
    if not reference.tag:
        problems.append(f"{image!r} has a digest but no tag, so nothing shows which release it is")
    elif reference.tag != tag:
        problems.append(f"{image!r} is tagged {reference.tag}, but {release} runs {tag}")
    if not reference.digest:
        problems.append(f"{image!r} has no digest, and a digest is all an override adds")
    return problems


@dataclass(frozen=True)
class PullPath:
    """Where the nodes pull each image from: the one rewrite of every image the stack runs, in its objects, in its
    charts' values, in `make bench`'s Job and in `make images`' listing.

    - Neither set: each image from its own registry, as written.
    - ``mirror`` (images.mirror, a repository the organisation fills): ``<mirror>/<registry>/<path>`` with the same
      tag and digest. The whole qualified name is kept under the mirror, so images of different registries never
      meet in one name, and a copy with `crane copy <image> <mirrored>` keeps the digest (crane copies the manifest,
      and with it the index of every platform, byte for byte).
    - ``remotes`` (images.pullThrough): registry -> the Artifact Registry remote repository that proxies it,
      ``<location>-docker.pkg.dev/<project>/<repository>``; an image of that registry is pulled as
      ``<repository>/<path>``, its path as the registry itself serves it (Docker Hub's official images under
      ``library/``, the name Docker's own client asks Docker Hub for: distribution/reference normalize.go), which is
      the path a remote repository asks its upstream for (a Docker Hub remote repository serves ubuntu:24.04 as
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
            return str(reference.with_name(f"{self.mirror}/{reference.qualified_name}"))
        repository = dict(self.remotes).get(reference.registry)
        return str(reference.with_name(f"{repository}/{reference.path}")) if repository else image


NO_PULL_PATH = PullPath()  # each image from its own registry


def secrets_in_plain_text(config: Any, secret_blocks: set[str], prefix: str = "") -> list[Problem]:
    """Settings documented as secret that hold a value outside a secret config key.

    Pulumi keeps secrecy per top-level key: ``pulumi config set --secret --path serving.hfToken``
    encrypts the value and marks the whole ``serving`` key secret, and the engine tells the
    program which keys are. A value typed into the stack file in plain text is neither.
    """
    problems = []
    for f in dataclasses.fields(config):
        key = join(prefix, camel(f.name))
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            problems += secrets_in_plain_text(value, secret_blocks, key)
        elif f.metadata.get("secret") and value and key.split(".")[0] not in secret_blocks:
            problems.append(
                Problem(
                    key,
                    "is in plain text in the stack file, where everyone who can read the repository sees it",
                    f"set it with `pulumi config set --secret --path {key} <value>` (it is then stored encrypted)",
                )
            )
    return problems


SECRET_SHOWN = "[secret]"


def redact_secret_values(problems: list[Problem], raw: Mapping[str, Any], secret_blocks: set[str]) -> list[Problem]:
    """The problems with the value of each key inside a secret top-level key replaced by ``[secret]``.

    Pulumi keeps secrecy per top-level key, so the program cannot tell which leaf of a secret key
    was encrypted: no message about a key inside one echoes that key's value, whatever it is.
    """
    redacted = []
    for problem in problems:
        value = _value_at(raw, problem.key) if problem.key.split(".")[0].split("[")[0] in secret_blocks else None
        if isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value):
            shown = [repr(value), str(value)]
            what, fix = problem.what, problem.fix
            for text in shown:
                what, fix = what.replace(text, SECRET_SHOWN), fix.replace(text, SECRET_SHOWN)
            problem = Problem(problem.key, what, fix)
        redacted.append(problem)
    return redacted


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


def redact_credentials(problems: list[Problem], raw: Mapping[str, Any]) -> list[Problem]:
    """The problems with every credential-looking text taken out: each value of ``raw`` under a key named for a
    credential, and anything ``CREDENTIAL_PATTERNS`` match, wherever it appears in a message."""
    named = sorted({str(v) for v in _values_under_credential_keys(raw) if str(v)}, key=len, reverse=True)

    def clean(text: str) -> str:
        for value in named:
            text = text.replace(repr(value), CREDENTIAL_SHOWN).replace(value, CREDENTIAL_SHOWN)
        for pattern in CREDENTIAL_PATTERNS:
            text = pattern.sub(CREDENTIAL_SHOWN, text)
        return text

    return [Problem(p.key, clean(p.what), clean(p.fix)) for p in problems]


def _values_under_credential_keys(raw: Any, named: bool = False) -> Iterable[Any]:
    if isinstance(raw, Mapping):
        for key, value in raw.items():
            yield from _values_under_credential_keys(value, named or bool(CREDENTIAL_KEY.search(str(key))))
    elif isinstance(raw, list):
        for item in raw:
            yield from _values_under_credential_keys(item, named)
    elif named and isinstance(raw, (str, int, float)) and not isinstance(raw, bool):
        yield raw


def _value_at(raw: Any, key: str) -> Any:
    """The raw value at a problem's key (``tpu.pools[0].name``); None where the path does not lead."""
    value = raw
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", key):
        if part.startswith("["):
            index = int(part[1:-1])
            value = value[index] if isinstance(value, list) and index < len(value) else None
        else:
            value = value.get(part) if isinstance(value, Mapping) else None
        if value is None:
            return None
    return value


# --- Documentation ---------------------------------------------------------------------


REQUIRED = "(required)"
REQUIRED_IN_ITEM = "(required in each item)"
REQUIRED_IF_SET = "(required when set)"


def documented_settings(
    cls: type, prefix: str = "", defaults: Any = None, required: str = REQUIRED
) -> list[tuple[str, str, str]]:
    """(key, default, description) for every setting of ``cls``, in schema order, for the config table of docs/configuration.md.

    A field without a default of its own shows its parent's default for it (``checks.subslicing.name``
    is ``subslice-check``: a partial object keeps the keys it leaves out). Only a field no default
    covers shows ``required``: ``(required)`` at the top, ``(required in each item)`` inside a
    list's items, ``(required when set)`` inside an optional object.
    """
    rows = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        key = join(prefix, camel(f.name))
        tp = hints[f.name]
        if defaults is not None:
            default = getattr(defaults, f.name)
        elif f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = dataclasses.MISSING
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            rows.extend(documented_settings(tp, key, None if default is dataclasses.MISSING else default, required))
            continue
        shown = required if default is dataclasses.MISSING else _render_default(default)
        rows.append((key, shown, f.metadata["doc"]))
        nested = next((a for a in typing.get_args(tp) if isinstance(a, type) and dataclasses.is_dataclass(a)), None)
        if nested is not None:
            in_list = typing.get_origin(tp) is list
            rows.extend(
                documented_settings(
                    nested, key + ("[]" if in_list else ""), None, REQUIRED_IN_ITEM if in_list else REQUIRED_IF_SET
                )
            )
    return rows


def _render_default(value: Any) -> str:
    if value is None:
        return "(unset)"
    if dataclasses.is_dataclass(value):
        value = _to_config_value(value)
    elif isinstance(value, list):
        value = [_to_config_value(v) for v in value]
    return json.dumps(value) if not isinstance(value, str) else (value or '""')


def _to_config_value(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {camel(f.name): _to_config_value(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list):
        return [_to_config_value(v) for v in value]
    return value

"""Shared config machinery and rules: how a setting's problems are said, pinned images, bucket names, quantities."""

import re
import typing
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field, StringConstraints, ValidationError
from pydantic.fields import FieldInfo

from components import naming
from components.config_base import (
    HINT,
    KIND,
    Block,
    Problems,
    form,
    image_pin_problem,
    image_unpinned_reason,
    parse_quantity,
    parse_settings,
)


@pytest.mark.parametrize(
    "image, fragment",
    [
        ("docker.io/vllm/vllm-tpu:latest", "floating tag 'latest'"),
        ("docker.io/vllm/vllm-tpu:nightly", "floating tag 'nightly'"),
        ("docker.io/vllm/vllm-tpu", "has no tag"),
        ("localhost:5000/vllm-tpu", "has no tag"),
        ("", "is empty"),
        ("vllm/vllm-tpu:v2", "names no release version (x.y.z) or build date"),  # refused since the pack's rule
        ("vllm/vllm-tpu@sha256:abc", "is not sha256:<64 hex>"),
        # Malformed references: one reading of them, ImageReference's, for the pin rule and the image's parts.
        ("vllm/vllm-tpu:0.26.0:x", "its tag '0.26.0:x' is not a tag"),
        ("vllm/vllm-tpu:", "its tag is empty"),
        ("vllm/vllm-tpu@", "its digest '' is not sha256:<64 hex>"),
        # A YAML block scalar (|) ends the value with a newline; Docker's grammar takes ASCII letters and digits only.
        ("vllm/vllm-tpu:v0.26.0\n", "is not a tag"),
        ("vllm/vllm-tpu:v0.26.0-\u00e9", "is not a tag"),
        ("vllm/vllm-tpu:v0.26.0-\u0663", "is not a tag"),
        ("vllm/vllm-tpu@sha256:" + "ab" * 32 + "\n", "is not sha256:<64 hex>"),
        # Docker's name grammar (distribution/reference regexp.go), which the kubelet parses every image with
        ("ghcr.io/LLM-D/llm-d-router-endpoint-picker:v0.10.0", "is not an image name"),
        ("vLLM/vllm-tpu:v0.26.0", "is not an image name"),
        ("vllm//vllm-tpu:v0.26.0", "is not an image name"),
        ("vllm/vllm-tpu_:v0.26.0", "is not an image name"),
        ("ghcr.io/llm d/x:v0.10.0", "is not an image name"),
        ("registry..example/vllm-tpu:v0.26.0", "is not an image name"),
        ("registry.example/" + "v" * 240 + ":v0.26.0", "is not an image name"),  # 257 characters
    ],
)
def test_images_must_be_pinned(image, fragment):
    problem = image_pin_problem(image)
    assert problem is not None and fragment in problem, problem


@pytest.mark.parametrize(
    "image",
    [
        "docker.io/vllm/vllm-tpu:nightly-20260430-18ed615-5b39b26",
        "vllm/vllm-tpu:v0.26.0",
        "localhost:5000/vllm-tpu:2026-05-01",
        "vllm/vllm-tpu@sha256:" + "ab" * 32,
        # the name's grammar: a registry's host name may be uppercase, a path may join with '__', '-' runs and '.'
        "Registry.Example:5000/vllm__tpu/vllm--tpu.x:v0.26.0",
        "[::1]:5000/vllm-tpu:v0.26.0",
        "registry.example/" + "v" * 238 + ":v0.26.0",  # 255 characters
    ],
)
def test_pinned_images(image):
    assert image_pin_problem(image) is None


@pytest.mark.parametrize(
    "image, pinned",
    [
        ("docker.io/library/python:3.12.8-slim-bookworm", True),
        ("us-docker.pkg.dev/cloud-tpu-images/jax-ai-image/tpu:jax0.9.0-rev1", True),
        ("docker.io/vllm/vllm-tpu:nightly-20260430-18ed615-5b39b26", True),  # a dated build
        ("ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0", True),
        ("tpuongke/kueue-slice-controller:v0.8.0-200", True),
        ("registry.example:5000/team/app:2026-04-30", True),
        ("nginx@sha256:" + "a" * 64, True),
        ("nginx:latest@sha256:" + "b" * 64, True),
        ("nginx", False),
        ("registry.example:5000/team/app", False),  # the port is not a tag
        ("nginx:latest", False),
        ("vllm/vllm-tpu:nightly", False),
        ("python:3.12", False),  # a minor alias moves with each patch release
        ("app:main", False),
        ("app:v2", False),
        ("nginx@sha256:abc", False),
        ("", False),
    ],
)
def test_which_images_are_pinned(image: str, pinned: bool) -> None:
    """The one rule of the config blocks and the policy pack."""
    assert (image_unpinned_reason(image) is None) is pinned, image_unpinned_reason(image)


@pytest.mark.parametrize(
    "name, fragment",
    [
        ("ab", "3 to 63"),
        ("Sax_Bucket", "3 to 63"),
        ("-bucket", "3 to 63"),
        ("b" * 64, "3 to 63"),
        ("goog-models", "'goog'"),
        ("my-google-weights", "'google'"),
        ("192.168.5.4", "an IP address"),
    ],
)
def test_bucket_names(name, fragment):
    problem = naming.bucket_name_problem(name)
    assert problem is not None and fragment in problem, problem


@pytest.mark.parametrize(
    "name", ["abc", "my-tpu-project-sax-admin", "weights_v2", "models.example.com", "192-168-5-4", "v1.2.3.4a"]
)
def test_valid_bucket_names(name):
    assert naming.bucket_name_problem(name) is None


@pytest.mark.parametrize("text, value", [("2", 2), ("500m", 0.5), ("4Gi", 4 * 2**30), ("1.5k", 1500)])
def test_quantities(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["two", "4GB", "", "-1"])
def test_not_quantities(text):
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        parse_quantity(text)


# --- The one mapping of pydantic's errors to the preview's problems, on a block of every kind of field ----------


class _Item(Block):
    name: str = Field(description="required")
    count: int = Field(1, description="at least 1", ge=1)


_Code = Annotated[
    str,
    StringConstraints(pattern="^[a-z]+$", max_length=4),
    Field(json_schema_extra=form("sample code", "write lowercase letters"), examples=["ex"]),
]


class _Coded(Block):
    code: _Code = Field(description="required, of a declared form")


class _Sample(Block):
    flag: bool = Field(False, description="a boolean")
    share: float = Field(0.5, description="between", gt=0, lt=1)
    level: Literal["low", "high"] = Field("low", description="an enum")
    items: list[_Item] = Field([], description="a list of objects")
    inner: _Item = Field(_Item(name="kept"), description="an object with a default")
    window: _Item | None = Field(None, description="an optional object")
    most: int = Field(3, description="at most 5", le=5)
    tags: list[str] = Field([], description="a list of strings")
    codes: list[_Code] = Field([], description="a list of a declared form")
    coded: list[_Coded] = Field([], description="objects with a required field of a declared form")


@pytest.mark.parametrize(
    "raw, key, said",
    [
        ({"flag": "yes"}, "flag", "flag: 'yes' is not true or false (set true or false)"),
        ({"share": 1}, "share", "share: 1 is not above 0 and below 1 (set a number above 0 and below 1)"),
        ({"share": 0.0}, "share", "share: 0.0 is not above 0 and below 1"),
        ({"level": "mid"}, "level", "level: 'mid' is not one of low, high (use one of low, high)"),
        ({"items": "a"}, "items", "items: must be a list of objects (write a YAML list)"),
        ({"items": [{"count": 2}]}, "items[0].name", "items[0].name: is required (set a string)"),
        ({"items": [{"name": "a", "count": 0}]}, "items[0].count", "items[0].count: 0 is not 1 or more"),
        ({"inner": 3}, "inner", "inner: must be an object (write a YAML mapping of its keys)"),
        (
            {"window": {"name": "w", "count": "x"}},
            "window.count",
            "window.count: 'x' is not an integer (set an integer)",
        ),
        ({"most": 9}, "most", "most: 9 is not at most 5 (set a number at most 5)"),
        ({"mots": 1}, "mots", "mots: is not a known setting (did you mean 'most'?)"),
        ({"tags": ["a", 1]}, "tags[1]", "tags[1]: 1 is not a string (set a string)"),
        (
            {"zzz": 1},
            "zzz",
            "zzz: is not a known setting (known keys: flag, share, level, items, inner, window, most, tags, codes, coded)",
        ),
        ({"inner": {"nam": "x"}}, "inner.nam", "did you mean 'name'?"),
        ({"codes": ["ok", "X"]}, "codes[1]", "codes[1]: 'X' is not a sample code (write lowercase letters)"),
        ({"codes": ["abcde"]}, "codes[0]", "codes[0]: 'abcde' is 5 characters; the limit is 4 (use at most 4)"),
        ({"coded": [{"code": "X"}]}, "coded[0].code", "coded[0].code: 'X' is not a sample code"),
    ],
)
def test_each_error_of_a_setting_is_said_under_its_key(raw, key, said):
    problems = Problems()
    block = parse_settings(_Sample, raw, problems)
    assert [p.key for p in problems.items] == [key]
    assert said in str(problems.items[0])
    assert block is not None  # the rules across settings still get a block: the failed value at its default
    assert key.split(".")[0].split("[")[0] not in raw or isinstance(block, _Sample)


def test_the_text_forms_of_scalars_and_partial_objects_are_read():
    problems = Problems()
    block = parse_settings(
        _Sample, {"flag": "TRUE", "share": "0.25", "most": "4", "inner": {"count": "2"}, "window": None}, problems
    )
    assert problems.items == []
    assert block is not None
    assert (block.flag, block.share, block.most) == (True, 0.25, 4)
    assert (block.inner.name, block.inner.count) == ("kept", 2)  # the default object's name kept


def test_a_failed_value_takes_its_default_and_a_missing_one_a_placeholder_for_the_rules():
    problems = Problems()
    block = parse_settings(_Sample, {"most": 9, "level": "mid", "items": [{"count": 2}, {"name": "b"}]}, problems)
    assert block is not None
    assert (block.most, block.level) == (3, "low")
    assert [item.name for item in block.items] == ["", "b"]
    assert {p.key for p in problems.items} == {"most", "level", "items[0].name"}


def test_a_failed_value_of_a_declared_form_is_stood_in_for_by_its_example():
    """The empty text does not match a pattern: the example does, so the block is still made for the rules."""
    problems = Problems()
    block = parse_settings(_Sample, {"codes": ["ok", "X"], "coded": [{"code": "Y"}, {"code": "b"}]}, problems)
    assert block is not None
    assert block.codes == ["ok", "ex"]
    assert [item.code for item in block.coded] == ["ex", "b"]
    assert {p.key for p in problems.items} == {"codes[1]", "coded[0].code"}


def test_python_builds_a_block_by_field_name_and_a_stack_file_by_key_only():
    assert _Sample(most=2).most == 2
    problems = Problems()
    parse_settings(_Item, {"name": "a", "count": 1}, problems)
    parse_settings(_Sample, {"most": 1, "items": [{"name": "a", "count": 1}]}, problems)
    assert problems.items == []
    with pytest.raises(ValidationError):
        _Sample.model_validate({"window": {"name": "a", "cuont": 1}}, by_name=False)


def _declared_forms(model: type[BaseModel], seen: set[type]) -> list[tuple[str, FieldInfo, list[typing.Any]]]:
    """(where, the FieldInfo holding its form, its constraints) of every setting of ``model`` and of the blocks below
    it that declares a pattern, a list's item included."""
    if model in seen:
        return []
    seen.add(model)
    found = []
    for name, info in model.model_fields.items():
        found.append((f"{model.__name__}.{name}", info, info.metadata))
        for item in (info.annotation, *typing.get_args(info.annotation)):  # X, X | None, list[X]
            metadata = getattr(item, "__metadata__", ())
            for inner in (m for m in metadata if isinstance(m, FieldInfo)):
                found.append((f"{model.__name__}.{name}[]", inner, [m for m in metadata if m is not inner]))
            if isinstance(item, type) and issubclass(item, BaseModel):
                found += _declared_forms(item, seen)
    return [(where, info, rules) for where, info, rules in found if any(getattr(m, "pattern", None) for m in rules)]


def test_every_declared_pattern_says_what_it_takes_and_stands_in_with_an_example_it_takes():
    """A value a field's pattern refuses is said as "not a <kind>" with the field's hint (without them it would be a
    bare regex mismatch), and its first example stands in for it while the rules across settings run."""
    from components.stack import StackConfig

    declared = _declared_forms(StackConfig, set())
    assert len(declared) >= 20, "the declared forms are found"
    unsaid = [where for where, info, _ in declared if not (_extra(info, KIND) and _extra(info, HINT))]
    assert unsaid == []
    for where, info, rules in declared:
        assert info.examples, f"{where} has no example"
        example = info.examples[0]
        for rule in rules:
            assert not getattr(rule, "pattern", None) or re.search(rule.pattern, example), (where, example)
            assert len(example) <= (getattr(rule, "max_length", None) or len(example)), (where, example)


def _extra(info: FieldInfo, key: str) -> object:
    return info.json_schema_extra.get(key) if isinstance(info.json_schema_extra, dict) else None


class _Leveled(Block):
    level: Literal["low", "high"] = Field(description="required, one of a few")


class _Levels(Block):
    items: list[_Leveled] = Field([], description="objects with a required choice")


def test_a_failed_required_choice_is_stood_in_for_by_its_first_value():
    problems = Problems()
    block = parse_settings(_Levels, {"items": [{"level": "mid"}, {"level": "high"}]}, problems)
    assert block is not None
    assert [item.level for item in block.items] == ["low", "high"]
    assert [p.key for p in problems.items] == ["items[0].level"]

"""Shared config machinery and rules: how a setting's problems are said, pinned images, bucket names, quantities."""

from typing import Literal

import pytest
from pydantic import Field, ValidationError

from components import naming
from components.config_base import (
    Block,
    Problems,
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
    ],
)
def test_bucket_names(name, fragment):
    problem = naming.bucket_name_problem(name)
    assert problem is not None and fragment in problem, problem


@pytest.mark.parametrize("name", ["abc", "my-tpu-project-sax-admin", "weights_v2", "models.example.com"])
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


class _Sample(Block):
    flag: bool = Field(False, description="a boolean")
    share: float = Field(0.5, description="between", gt=0, lt=1)
    level: Literal["low", "high"] = Field("low", description="an enum")
    items: list[_Item] = Field([], description="a list of objects")
    inner: _Item = Field(_Item(name="kept"), description="an object with a default")
    window: _Item | None = Field(None, description="an optional object")
    most: int = Field(3, description="at most 5", le=5)
    tags: list[str] = Field([], description="a list of strings")


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
            "zzz: is not a known setting (known keys: flag, share, level, items, inner, window, most, tags)",
        ),
        ({"inner": {"nam": "x"}}, "inner.nam", "did you mean 'name'?"),
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


def test_python_builds_a_block_by_field_name_and_a_stack_file_by_key_only():
    assert _Sample(most=2).most == 2
    problems = Problems()
    parse_settings(_Item, {"name": "a", "count": 1}, problems)
    parse_settings(_Sample, {"most": 1, "items": [{"name": "a", "count": 1}]}, problems)
    assert problems.items == []
    with pytest.raises(ValidationError):
        _Sample.model_validate({"window": {"name": "a", "cuont": 1}}, by_name=False)


def _declared_strings(model: type, seen: set[type]) -> list[tuple[str, object, object]]:
    """(model.field, its constraints, its json_schema_extra) of every text setting of ``model`` and the blocks below
    it, a list's item included."""
    import typing

    from pydantic import BaseModel
    from pydantic.fields import FieldInfo

    if model in seen:
        return []
    seen.add(model)
    found = []
    for name, info in model.model_fields.items():
        found.append((f"{model.__name__}.{name}", info.metadata, info.json_schema_extra))
        for item in (info.annotation, *typing.get_args(info.annotation)):  # X, X | None, list[X]
            extras = [m for m in getattr(item, "__metadata__", ()) if isinstance(m, FieldInfo)]
            if extras:
                constraints = [m for m in item.__metadata__ if not isinstance(m, FieldInfo)]
                found.append((f"{model.__name__}.{name}[]", constraints, extras[0].json_schema_extra))
            if isinstance(item, type) and issubclass(item, BaseModel):
                found += _declared_strings(item, seen)
    return found


def test_every_declared_pattern_says_what_it_takes_and_how_to_write_it():
    """A value a field's pattern refuses is said as "not a <kind>" with the field's hint: a pattern without them
    would be said as a bare regex mismatch."""
    from components.config_base import HINT, KIND
    from components.stack import StackConfig

    patterned = [
        (where, extra)
        for where, metadata, extra in _declared_strings(StackConfig, set())
        if any(getattr(m, "pattern", None) for m in metadata)
    ]
    assert len(patterned) >= 20, "the declared forms are found"
    missing = [
        where for where, extra in patterned if not (isinstance(extra, dict) and extra.get(KIND) and extra.get(HINT))
    ]
    assert missing == []

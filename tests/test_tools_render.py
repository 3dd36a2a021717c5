"""The offline render: the committed summaries per stack (golden files), secret hygiene, and failure on bad config."""

import json
import re

import pytest

from components import manifests
from components import stack as stack_config
from tests.conftest import FIXTURE_STACKS, PROJECT_ROOT, stack_values
from tools import render
from tools.stack_file import SECRET_PLACEHOLDER, NoStackFile, stack_config_values, stack_names

STACKS = stack_names()  # the user's
GOLDEN = PROJECT_ROOT / "tests" / "golden"


@pytest.fixture(scope="module")
def renders():
    return {stack: render.render(stack) for stack in STACKS}


def test_the_goldens_are_the_summaries_of_every_stack():
    """tests/golden holds the committed summaries of every stack's render, and nothing else: the full dumps are the
    pull-request workflow's render diff (make render-diff here)."""
    committed = {str(p.relative_to(GOLDEN)) for p in GOLDEN.rglob("*") if p.is_file()}
    assert committed == {f"{stack}/{name}" for stack in STACKS for name in render.GOLDEN}, "run `make golden`"
    assert set(render.GOLDEN) < set(render.FILES)


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("file_name", render.GOLDEN)
def test_render_matches_golden(renders, stack, file_name):
    files, _ = renders[stack]
    golden = GOLDEN / stack / file_name
    assert golden.exists(), f"no golden {golden.relative_to(PROJECT_ROOT)}: run `make golden`"
    assert files[file_name] == golden.read_text(), (
        f"the render of stack {stack} drifted from {golden.relative_to(PROJECT_ROOT)}; "
        "if the change is intended run `make golden` and review the diff"
    )


@pytest.mark.parametrize("stack", STACKS)
def test_resources_are_sorted_and_parented(renders, stack):
    files, _ = renders[stack]
    entries = json.loads(files["resources.json"])
    assert entries == sorted(entries, key=lambda e: (e["type"], e["name"]))
    for entry in entries:
        assert (
            {"type", "name", "parent", "inputs"}
            <= set(entry)
            <= {"type", "name", "parent", "inputs", "dependsOn", "options"}
        )
        assert ("dependsOn" in entry) == (not entry["type"].startswith("tpu-gke:")), entry["name"]


@pytest.mark.parametrize("stack", STACKS)
def test_no_secret_in_clear_text(renders, stack):
    files, _run = renders[stack]
    text = "".join(files.values())
    assert SECRET_PLACEHOLDER not in text
    assert "gke-gcloud-auth-plugin" not in text  # the kubeconfig stays masked
    provider = next(e for e in json.loads(files["resources.json"]) if e["type"] == "pulumi:providers:kubernetes")
    assert provider["inputs"]["kubeconfig"] == "[secret]"
    assert json.loads(files["outputs.json"])["kubeconfig"] == "[secret]"


def test_secure_stack_values_become_secret_placeholders(tmp_path):
    (tmp_path / "Pulumi.s.yaml").write_text(
        "config:\n"
        "  tpu-dynamic-slicing:token:\n    secure: AAABAKZ0ciphertext\n"
        "  tpu-dynamic-slicing:serving:\n    model: m\n    auth:\n      secure: AAABAKZ0other\n"
        "  tpu-dynamic-slicing:region: us-central1\n"
    )
    values, secret_keys = stack_config_values("s", tmp_path)
    assert values["tpu-dynamic-slicing:token"] == SECRET_PLACEHOLDER
    assert json.loads(values["tpu-dynamic-slicing:serving"]) == {"model": "m", "auth": SECRET_PLACEHOLDER}
    assert sorted(secret_keys) == ["tpu-dynamic-slicing:serving", "tpu-dynamic-slicing:token"]
    assert "AAABAKZ0" not in json.dumps(values)


def test_a_secure_value_of_a_setting_with_a_pattern_renders(tmp_path):
    """`pulumi config set --secret --path alerts.emails[0] <address>` writes its ciphertext; the offline render stands
    in the setting's example for it (an address), as the CLI's preview has the decrypted address."""
    text = (FIXTURE_STACKS / "Pulumi.prod.yaml").read_text()
    assert "emails: [tpu-oncall@example.com]" in text
    (tmp_path / "Pulumi.prod.yaml").write_text(text.replace("[tpu-oncall@example.com]", "[{secure: AAABAKZ0mail}]"))
    values, secret_keys = stack_config_values("prod", tmp_path)
    assert json.loads(values["tpu-dynamic-slicing:alerts"])["emails"] == ["oncall@example.com"]
    assert "tpu-dynamic-slicing:alerts" in secret_keys
    files, _ = render.render("prod", tmp_path)
    assert (
        "oncall@example.com" not in files["resources.json"] and '"email_address": "[secret]"' in files["resources.json"]
    )


def test_make_golden_writes_the_summaries_alone_over_what_was_there(tmp_path):
    stale = tmp_path / "saxml"
    stale.mkdir()
    (stale / "resources.json").write_text("[a full dump committed before]")
    tests_saxml = ["--stack", "saxml", "--stack-dir", str(FIXTURE_STACKS)]
    assert render.main([*tests_saxml, "--out", str(tmp_path), "--keep-on-failure", "--golden"]) == 0
    assert sorted(p.name for p in stale.iterdir()) == sorted(render.GOLDEN)


def test_cli_writes_the_files_and_a_summary(tmp_path, capsys):
    assert render.main(["--stack", "dev", "--stack-dir", str(FIXTURE_STACKS), "--out", str(tmp_path)]) == 0
    names = sorted(p.name for p in (tmp_path / "dev").iterdir())
    assert names == sorted(render.FILES)
    printed = capsys.readouterr().out
    assert "1  gcp:compute/resourcePolicy:ResourcePolicy" in printed
    # what the TPU pools hold, as the stack's capacity report says it
    assert all(line in printed for line in stack_config.load(stack_values()).config.tpu.capacity_lines())
    # The order of `up` and of `destroy`, as graph.txt holds it.
    graph = (tmp_path / "dev" / "graph.txt").read_text()
    assert all(f"  {line}" in printed for line in graph.splitlines() if line)


def _waves(graph: str, direction: str) -> list[str]:
    """The resources of graph.txt's ``create`` or ``destroy`` waves, in wave order."""
    lines = [line for line in graph.splitlines() if line.startswith(f"{direction} ")]
    return [name for line in lines for name in line.split(": ", 1)[1].split(", ")]


@pytest.mark.parametrize("stack", STACKS)
def test_the_graph_lists_every_resource_once_in_each_direction(renders, stack):
    files, run = renders[stack]
    nodes = sorted(r.name for r in run.registrations if not r.type.startswith("tpu-gke:"))
    assert sorted(_waves(files["graph.txt"], "create")) == sorted(_waves(files["graph.txt"], "destroy")) == nodes


def test_a_stack_that_makes_its_cluster_enables_the_apis_first_and_lets_them_go_last():
    """On the tests' dev stack, which makes its network and cluster (on a cluster made elsewhere the Kubernetes
    provider waits for no API)."""
    files, run = render.render("dev", FIXTURE_STACKS)
    created, deleted = _waves(files["graph.txt"], "create"), _waves(files["graph.txt"], "destroy")
    apis = {r.name for r in run.registrations if r.type == "gcp:projects/service:Service"}
    assert set(created[: len(apis)]) == set(deleted[-len(apis) :]) == apis


def test_cli_fails_on_bad_config_and_writes_nothing(tmp_path, capsys):
    stack_file = re.sub(r"mtu: [0-9]+", "mtu: 9500", (FIXTURE_STACKS / "Pulumi.dev.yaml").read_text(), count=1)
    (tmp_path / "Pulumi.broken.yaml").write_text(stack_file)
    out = tmp_path / "render"
    (out / "broken").mkdir(parents=True)
    (out / "broken" / "resources.json").write_text("[] stale")
    assert render.main(["--stack", "broken", "--stack-dir", str(tmp_path), "--out", str(out)]) == 1
    assert "network.mtu: 9500 is outside 1300-8896" in capsys.readouterr().err
    assert not (out / "broken").exists()


def test_cli_fails_on_a_missing_stack(tmp_path, capsys):
    assert render.main(["--stack", "nope", "--stack-dir", str(tmp_path), "--out", str(tmp_path / "o")]) == 1
    assert "Pulumi.nope.yaml" in capsys.readouterr().err


def test_a_missing_file_of_the_program_fails_as_itself_not_as_a_missing_stack(tmp_path, monkeypatch):
    """A manifest gone (a checkout missing a file) was said as 'there is no Pulumi.dev.yaml', with dev among the
    stacks listed: every FileNotFoundError of the run was taken for the stack file's."""
    monkeypatch.setattr(manifests, "MANIFESTS", tmp_path / "manifests")
    manifests._load.cache_clear()  # each manifest is read again, from the folder that is not there
    argv = ["--stack", "dev", "--stack-dir", str(FIXTURE_STACKS), "--out", str(tmp_path / "render")]
    with pytest.raises(FileNotFoundError, match="manifests") as missing:
        render.main(argv)
    assert not isinstance(missing.value, NoStackFile)


@pytest.mark.parametrize(
    "stack",
    ["..", ".", "", "../render", "{tmp}/elsewhere", "dev/..", "a" * 101, "dev\n"],
    ids=["parent", "itself", "empty", "relative-path", "absolute-path", "dot-dot-in-a-path", "101-long", "newline"],
)
def test_a_stack_name_that_is_not_one_removes_nothing_and_is_a_usage_error(tmp_path, capsys, stack):
    """The render replaces <out>/<stack>: a name that is a path, '.' or '..' would have it remove another folder
    (an absolute path stays under tmp_path, so a regression removes nothing of this machine's)."""
    stack = stack.format(tmp=tmp_path)
    out = tmp_path / "build" / "render"
    kept = [out / "dev" / "resources.json", tmp_path / "build" / "other.txt", tmp_path / "elsewhere" / "x"]
    for path in kept:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("kept")
    with pytest.raises(SystemExit) as exited:
        render.main(["--stack", stack, "--stack-dir", str(FIXTURE_STACKS), "--out", str(out)])
    assert exited.value.code == 2
    assert "is not a stack name" in capsys.readouterr().err
    assert all(path.read_text() == "kept" for path in kept)


def _graph_waves(graph: str) -> list[tuple[str, list[str]]]:
    return [
        (line.split(":", 1)[0], line.split(": ", 1)[1].split(", "))
        for line in graph.splitlines()
        if line.startswith(("create ", "destroy "))
    ]


def _pictured_waves(waves_md: str) -> tuple[list[tuple[str, list[str]]], list[tuple[str, str]]]:
    import re

    boxes = [
        (f"{kind} {number}", ", ".join(rows.split("<br/>")).split(", "))
        for kind, number, rows in re.findall(r'^  (create|destroy)\d+\["<b>\1 (\d+)</b><br/>(.*)"\]$', waves_md, re.M)
    ]
    arrows = re.findall(r"^  ((?:create|destroy)\d+) --> ((?:create|destroy)\d+)$", waves_md, re.M)
    return boxes, arrows


@pytest.mark.parametrize("stack", STACKS)
def test_the_waves_picture_draws_graph_txt_s_waves_in_order(stack):
    """waves.md holds graph.txt's waves, each resource once, every wave after the one before it."""
    graph = (GOLDEN / stack / "graph.txt").read_text()
    boxes, arrows = _pictured_waves((GOLDEN / stack / "waves.md").read_text())
    assert boxes == _graph_waves(graph)
    for kind in ("create", "destroy"):
        count = sum(1 for name, _ in boxes if name.startswith(kind))
        assert [a for a in arrows if a[0].startswith(kind)] == [
            (f"{kind}{i}", f"{kind}{i + 1}") for i in range(1, count)
        ]

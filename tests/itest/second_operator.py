"""A second operator: `pulumi up` on a lab stack from a process of its own, as a colleague's terminal would.

    python -m tests.itest.second_operator WORK_DIR STACK CLI_ROOT

The environment (PULUMI_HOME, the file backend, the passphrase) comes from the caller. Prints one JSON line:
the exit status and the engine's output; exits 0 whatever the up did.
"""

from __future__ import annotations

import json
import sys

from pulumi import automation as auto

from tests.itest.engine import program
from tests.itest.lab import PROJECT_NAME


def main() -> None:
    work_dir, stack_name, cli_root = sys.argv[1:4]
    lines: list[str] = []
    workspace = auto.LocalWorkspaceOptions(
        work_dir=work_dir,
        pulumi_command=auto.PulumiCommand(root=cli_root, skip_version_check=True),
        project_settings=auto.ProjectSettings(name=PROJECT_NAME, runtime="python"),
    )
    stack = auto.select_stack(stack_name, project_name=PROJECT_NAME, program=program, opts=workspace)
    try:
        stack.up(on_output=lines.append, color="never")
        result = {"ok": True, "output": "\n".join(lines)}
    except auto.CommandError as error:
        result = {"ok": False, "output": "\n".join(lines), "error": str(error)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()

"""Entry point the Pulumi CLI runs (``python -m pulumi.policy <engine> policy/``): serve the pack.

The rules read the program's machine catalog and quantity parser, so the repository root goes on
the path; the pack therefore runs from a checkout of this repository, not as a published pack.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulumi_policy import EnforcementLevel, PolicyPack

from policy import PACK_NAME
from policy.pack import build_policies

PolicyPack(name=PACK_NAME, policies=build_policies(), enforcement_level=EnforcementLevel.MANDATORY)

"""How the preview says what a review of the running stack or of a cloud read found (the lifecycle review, the TPU
reservation's, the existing weights bucket's). Not in components/resources.py: it words the refusals as the config's
problems, and the shared helpers import none of each other; this is the lowest layer that may."""

from __future__ import annotations

import pulumi

from components.config_base import ConfigError, Problem


def say_review(report: list[str], warnings: list[str], refused: list[Problem]) -> None:
    """The review's report as information, its warnings loudly, and what it refuses as a config error that stops the
    preview (a RunError, which the engine prints as its message, with no traceback)."""
    for line in report:
        pulumi.log.info(line)
    for warning in warnings:
        pulumi.log.warn(warning)
    if refused:
        raise pulumi.RunError(str(ConfigError(refused)))

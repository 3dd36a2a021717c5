"""The policy pack's policies called as the Pulumi policy SDK calls them, with its own argument types: the tests run
the pack's real wrappers, so which rule each policy applies and which policy config it reads are written once, in
policy/pack.py."""

from __future__ import annotations

from typing import Any

from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import unknown_checking_proxy

from policy.pack import build_policies
from policy.resources import Resource

POLICIES = {p.name: p for p in build_policies()}


def options(protect: bool = False) -> PolicyResourceOptions:
    return PolicyResourceOptions(protect, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])


def policy_resource(resource: Resource) -> PolicyResource:
    return PolicyResource(
        resource.type, unknown_checking_proxy(dict(resource.props)), resource.urn, resource.name,
        options(resource.protect), None, None, [], {},
    )  # fmt: skip


def reported(name: str, resources: list[Resource], config: dict[str, Any] | None = None) -> list[tuple[str, Any]]:
    """What the policy ``name`` reports on ``resources`` (message, URN): a stack policy sees them all at once, a
    resource policy each alone, as the engine hands them over (their properties behind the SDK's unknown-checking
    proxy)."""
    target = POLICIES[name]
    found: list[tuple[str, Any]] = []

    def report(message: str, urn: str | None = None) -> None:
        found.append((message, urn))

    if isinstance(target, StackValidationPolicy):
        target.validate(StackValidationArgs([policy_resource(r) for r in resources], config), report)
        return found
    for r in resources:
        args = ResourceValidationArgs(
            r.type, unknown_checking_proxy(dict(r.props)), r.urn, r.name, options(r.protect), None, config
        )
        target.validate(args, report)
    return found


def messages(name: str, resources: list[Resource], config: dict[str, Any] | None = None) -> list[str]:
    return [message for message, _ in reported(name, resources, config)]

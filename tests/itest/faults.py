"""What the fault tests inject, for real: an admission webhook the API server calls before it stores an
object (to hold a request in flight while the CLI is interrupted, or to keep an `up` running while another
one starts), a ValidatingAdmissionPolicy that refuses one object, and the listing of what a namespace holds.

The webhook is a real HTTPS server on 127.0.0.1 with a certificate made for the run; kube-apiserver dials it
from its ValidatingWebhookConfiguration like any other webhook. Its failurePolicy is Ignore, so a test that
dies leaves nothing that could refuse the next one.
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.itest.lab import ControlPlane, object_key

WEBHOOK_NAME = "hold.faults.tpu-gke.lab"
WEBHOOK_CONFIGURATION = "tpu-gke-lab-faults-hold"
HOLD_SECONDS_MAX = 25.0  # kube-apiserver gives a webhook at most 30 s


@dataclass(frozen=True)
class Match:
    """Which admission requests a hold applies to."""

    resource: str  # plural, e.g. "jobs"
    name: str
    operations: tuple[str, ...] = ("CREATE",)

    def __call__(self, request: dict[str, Any]) -> bool:
        name = request.get("name") or ((request.get("object") or {}).get("metadata") or {}).get("name")
        return (
            (request.get("resource") or {}).get("resource") == self.resource
            and name == self.name
            and request.get("operation") in self.operations
        )


class QuietServer(ThreadingHTTPServer):
    """Drops a request whose client went away (kube-apiserver aborting a call it no longer needs) without
    a traceback."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if not isinstance(error, (ssl.SSLError, ConnectionError)):
            super().handle_error(request, client_address)


@dataclass
class HoldingWebhook:
    """Admits everything it is sent; a request that matches the current hold waits until ``release()``
    (at most HOLD_SECONDS_MAX)."""

    directory: Path
    seen: list[dict[str, Any]] = field(default_factory=list)
    hold: Match | None = None
    held: threading.Event = field(default_factory=threading.Event)  # set once a matching request arrived
    released: threading.Event = field(default_factory=threading.Event)
    port: int = 0

    def __post_init__(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.certificate = self.directory / "webhook.crt"
        key = self.directory / "webhook.key"
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
             "-keyout", str(key), "-out", str(self.certificate), "-subj", "/CN=127.0.0.1",
             "-addext", "subjectAltName=IP:127.0.0.1"],
            check=True, capture_output=True,
        )  # fmt: skip
        webhook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                request = review.get("request") or {}
                webhook.seen.append(request)
                if webhook.hold is not None and webhook.hold(request):
                    webhook.held.set()
                    webhook.released.wait(HOLD_SECONDS_MAX)
                body = json.dumps(
                    {
                        "apiVersion": "admission.k8s.io/v1",
                        "kind": "AdmissionReview",
                        "response": {"uid": request.get("uid"), "allowed": True},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = QuietServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(self.certificate), str(key))
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = int(self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, name="lab-webhook", daemon=True).start()

    def configuration(self, rules: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": WEBHOOK_CONFIGURATION, "labels": {"tpu-gke.lab/fault": "true"}},
            "webhooks": [
                {
                    "name": WEBHOOK_NAME,
                    "clientConfig": {
                        "url": f"https://127.0.0.1:{self.port}/admit",
                        "caBundle": base64.b64encode(self.certificate.read_bytes()).decode(),
                    },
                    "rules": rules,
                    "failurePolicy": "Ignore",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": 30,
                }
            ],
        }

    @contextmanager
    def holding(self, plane: ControlPlane, match: Match, rule: dict[str, Any]) -> Iterator[HoldingWebhook]:
        """Registered with kube-apiserver for ``rule`` (and ConfigMap creates, to see that it is called),
        holding what ``match`` selects; always unregistered."""
        self.hold, self.seen[:] = match, []
        self.held.clear()
        self.released.clear()
        plane.kubectl("apply", "-f", "-", stdin=json.dumps(self.configuration([rule, PROBE_RULE])))
        try:
            self.wait_until_called(plane)
            yield self
        finally:
            self.released.set()
            self.hold = None
            plane.kubectl("delete", "validatingwebhookconfiguration", WEBHOOK_CONFIGURATION, "--ignore-not-found")

    def wait_until_called(self, plane: ControlPlane, timeout: float = 30.0) -> None:
        """kube-apiserver picks a new webhook configuration up asynchronously: dry-run a ConfigMap create
        until the webhook sees one."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            plane.kubectl("create", "--dry-run=server", "-f", "-", stdin=json.dumps(PROBE), check=False)
            if any((r.get("resource") or {}).get("resource") == "configmaps" for r in self.seen):
                return
            time.sleep(0.5)
        raise AssertionError(f"kube-apiserver did not call the lab's webhook within {timeout:.0f} s")

    def release(self) -> None:
        self.released.set()

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


PROBE_RULE = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}
PROBE = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tpu-gke-lab-probe", "namespace": "default"}}


# --- A policy that refuses one object ---------------------------------------------------------------------

REFUSAL_POLICY = "tpu-gke-lab-refuse-one"


def refusal_policy(group: str, resource: str, name: str, message: str) -> list[dict[str, Any]]:
    """A ValidatingAdmissionPolicy and its binding: creating ``resource`` named ``name`` is denied with
    ``message`` (CEL, evaluated by kube-apiserver itself)."""
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": REFUSAL_POLICY, "labels": {"tpu-gke.lab/fault": "true"}},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {"apiGroups": [group], "apiVersions": ["*"], "operations": ["CREATE"], "resources": [resource]}
                    ]
                },
                "validations": [{"expression": f"object.metadata.name != '{name}'", "message": message}],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": REFUSAL_POLICY, "labels": {"tpu-gke.lab/fault": "true"}},
            "spec": {"policyName": REFUSAL_POLICY, "validationActions": ["Deny"]},
        },
    ]


def wait_until_refused(plane: ControlPlane, probe: dict[str, Any], refused: bool, timeout: float = 30.0) -> None:
    """Until a server-side dry-run create of ``probe`` is refused (or admitted): policies apply asynchronously."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = plane.kubectl("create", "--dry-run=server", "-f", "-", stdin=json.dumps(probe), check=False)
        is_refused = done.returncode != 0 and REFUSAL_POLICY in done.stderr
        if is_refused == refused:
            return
        time.sleep(0.5)
    raise AssertionError(f"the policy {REFUSAL_POLICY} is not {'in' if refused else 'out of'} force after {timeout} s")


# --- What a namespace holds -------------------------------------------------------------------------------

NAMESPACE_DEFAULTS = {("ServiceAccount", "default"), ("ConfigMap", "kube-root-ca.crt")}  # made by KCM
NOT_OBJECTS = {"events", "events.events.k8s.io"}


def namespaced_resources(plane: ControlPlane) -> list[str]:
    listed = plane.kubectl("api-resources", "--verbs=list", "--namespaced", "-o", "name").stdout.split()
    return sorted(r for r in listed if r not in NOT_OBJECTS)


def objects_in(plane: ControlPlane, namespaces: list[str]) -> list[dict[str, Any]]:
    """Every object of every listable kind in ``namespaces``, as the server has them."""
    resources = ",".join(namespaced_resources(plane))
    found = []
    for namespace in namespaces:
        listing = plane.kubectl("get", resources, "-n", namespace, "-o", "json", "--ignore-not-found").stdout
        found += json.loads(listing or '{"items": []}')["items"]
    return found


def orphans(served: list[dict[str, Any]], rendered: list[dict[str, Any]]) -> list[str]:
    """What the namespaces hold that is neither in the render, nor made by a controller for one of its objects
    (an owner reference, or the Endpoints of a Service), nor a namespace's defaults."""
    declared = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in rendered}
    services = {(ns, name) for kind, ns, name in declared if kind == "Service"}
    left = []
    for obj in served:
        metadata = obj["metadata"]
        key = (obj["kind"], metadata.get("namespace"), metadata["name"])
        if key in declared or (obj["kind"], metadata["name"]) in NAMESPACE_DEFAULTS or metadata.get("ownerReferences"):
            continue
        if obj["kind"] == "Endpoints" and (metadata.get("namespace"), metadata["name"]) in services:
            continue
        left.append(f"{obj['kind']} {metadata.get('namespace')}/{metadata['name']}")
    return sorted(left)


PROVIDER_FIELD_MANAGER = "pulumi-kubernetes"  # the prefix of the field manager the provider applies with


def managed_by_pulumi(plane: ControlPlane) -> list[str]:
    """Every object in the cluster, namespaced or not, that the Kubernetes provider wrote: its server-side
    apply field manager owns fields of it (the provider sets no managed-by label in server-side apply mode)."""
    listed = plane.kubectl("api-resources", "--verbs=list", "-o", "name").stdout.split()
    resources = ",".join(sorted(r for r in listed if r not in NOT_OBJECTS))
    items = json.loads(plane.kubectl("get", resources, "-A", "-o", "json", "--show-managed-fields").stdout)["items"]
    return sorted(
        object_key(o)
        for o in items
        if any(
            str(m.get("manager", "")).startswith(PROVIDER_FIELD_MANAGER)
            for m in o["metadata"].get("managedFields") or []
        )
    )

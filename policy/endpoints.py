"""No load balancer reachable from the internet unless the stack opts in.

GKE makes a load balancer for a Service of type LoadBalancer (external unless annotated
internal), for a Gateway (internal or external by its GatewayClass) and for an Ingress of the
GKE classes (external unless ``gce-internal``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policy.resources import get, kubernetes_objects, mapping_of

# GKE's classes of internal Application Load Balancers: the regional one (single- and multi-cluster) and the
# cross-regional one (multi-cluster) (docs.cloud.google.com/kubernetes-engine/docs/how-to/gatewayclass-capabilities).
INTERNAL_GATEWAY_CLASSES = frozenset({"gke-l7-rilb", "gke-l7-rilb-mc", "gke-l7-cross-regional-internal-managed-mc"})
EXTERNAL_GATEWAY_CLASSES = frozenset(
    {
        "gke-l7-global-external-managed",
        "gke-l7-global-external-managed-mc",
        "gke-l7-regional-external-managed",
        "gke-l7-regional-external-managed-mc",
        "gke-l7-gxlb",
        "gke-l7-gxlb-mc",
    }
)
# Either annotation makes GKE build an internal passthrough load balancer for the Service.
INTERNAL_SERVICE_ANNOTATIONS = ("networking.gke.io/load-balancer-type", "cloud.google.com/load-balancer-type")
INGRESS_CLASS_ANNOTATION = "kubernetes.io/ingress.class"

OPT_IN = "allowPublicEndpoints"


def public_endpoint_problems(resource_type: str, name: str, props: Mapping[str, Any], allow_public: bool) -> list[str]:
    """What in the resource would face the internet; empty when the stack opts in (``allow_public``)."""
    if allow_public:
        return []
    problems = []
    for obj in kubernetes_objects(resource_type, name, props):
        if obj.kind == "Service" and obj.api_group == "":
            problems += _service(obj.label, obj.body, name)
        elif obj.kind == "Gateway" and obj.api_group == "gateway.networking.k8s.io":
            problems += _gateway(obj.label, obj.body, name)
        elif obj.kind == "Ingress" and obj.api_group in ("networking.k8s.io", "extensions"):
            problems += _ingress(obj.label, obj.body, name)
    return problems


def _service(label: str, body: Mapping[str, Any], owner: str) -> list[str]:
    if get(body, "spec.type", owner=owner) != "LoadBalancer":
        return []
    annotations = mapping_of(body, "metadata.annotations", owner=owner)
    if any(str(annotations.get(key, "")).lower() == "internal" for key in INTERNAL_SERVICE_ANNOTATIONS):
        return []
    return [
        f"Service {label} is a LoadBalancer without the annotation "
        f"{INTERNAL_SERVICE_ANNOTATIONS[0]}: Internal, so GKE gives it an external IP; "
        f"annotate it internal, or set {OPT_IN}: true in the policy config of a stack meant to be public"
    ]


def _gateway(label: str, body: Mapping[str, Any], owner: str) -> list[str]:
    gateway_class = get(body, "spec.gatewayClassName", "", owner=owner)
    if gateway_class in INTERNAL_GATEWAY_CLASSES:
        return []
    if gateway_class in EXTERNAL_GATEWAY_CLASSES:
        reason = f"uses the internet-facing class {gateway_class}"
    else:
        known = ", ".join(sorted(INTERNAL_GATEWAY_CLASSES))
        reason = f"uses the class {gateway_class!r}, which is not one of the internal GKE classes ({known})"
    return [f"Gateway {label} {reason}; use an internal class, or set {OPT_IN}: true for a stack meant to be public"]


def _ingress(label: str, body: Mapping[str, Any], owner: str) -> list[str]:
    annotations = mapping_of(body, "metadata.annotations", owner=owner)
    ingress_class = get(body, "spec.ingressClassName", None, owner=owner) or annotations.get(
        INGRESS_CLASS_ANNOTATION, "gce"
    )
    if ingress_class != "gce":  # gce-internal, or a controller of its own behind a Service (checked there)
        return []
    return [
        f"Ingress {label} gets GKE's external load balancer (class gce); use gce-internal, "
        f"or set {OPT_IN}: true for a stack meant to be public"
    ]

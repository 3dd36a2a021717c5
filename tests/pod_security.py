"""The Pod Security Standards' baseline and restricted levels as checks of one pod, for the tests.

Written from the standard, https://kubernetes.io/docs/concepts/security/pod-security-standards/ (the controls, their
restricted fields and allowed values), as it stands for Kubernetes v1.35 and v1.36, the minors the stacks'
namespaces pin (pod-security.kubernetes.io/enforce-version). No control changed between the two: in
kubernetes/pod-security-admission v0.36.2 (the Pod Security admission of Kubernetes v1.36.2), policy/check_*.go, no
check has a minimum version above 1.35. That source says from which version each control holds; the ones that
arrived late are noted on their function. A pod is its metadata (annotations) and its spec, as the API server sees it
when the pod is created: after the mutating webhooks, so a sidecar a webhook injects is part of it.

``violations(level, metadata, spec)`` lists every control of ``level`` the pod breaks; restricted holds every
baseline control too (the standard: "Everything from the baseline profile").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

BASELINE, RESTRICTED = "baseline", "restricted"
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")

Pod = Mapping[str, Any]


def containers(spec: Pod) -> Iterator[Mapping[str, Any]]:
    """Every container of the pod: regular, init (sidecars included) and ephemeral; the standard's
    ``spec.containers[*]`` fields hold for all three."""
    for key in CONTAINER_LISTS:
        yield from spec.get(key) or []


def security(holder: Mapping[str, Any]) -> Mapping[str, Any]:
    """A pod's or a container's securityContext, empty when unset."""
    return holder.get("securityContext") or {}


def _named(container: Mapping[str, Any], problem: str) -> str:
    return f"container {container.get('name', '?')!r} {problem}"


def _windows(spec: Pod) -> bool:
    """A pod declared for Windows: restricted exempts it from the Linux-only controls (since v1.25)."""
    return (spec.get("os") or {}).get("name") == "windows"


def _user_namespace(spec: Pod) -> bool:
    """``hostUsers: false``: the pod runs in a user namespace, where root and /proc are the namespace's (v1.35)."""
    return spec.get("hostUsers") is False


# --- Baseline --------------------------------------------------------------------------------


def host_process(metadata: Pod, spec: Pod) -> list[str]:
    """HostProcess: windowsOptions.hostProcess of the pod and of every container undefined or false."""
    found = []
    if (security(spec).get("windowsOptions") or {}).get("hostProcess"):
        found.append("the pod is a Windows HostProcess pod")
    found += [
        _named(c, "is a Windows HostProcess container")
        for c in containers(spec)
        if (security(c).get("windowsOptions") or {}).get("hostProcess")
    ]
    return found


def host_namespaces(metadata: Pod, spec: Pod) -> list[str]:
    """Host Namespaces: hostNetwork, hostPID and hostIPC undefined or false."""
    return [f"the pod sets {field}" for field in ("hostNetwork", "hostPID", "hostIPC") if spec.get(field)]


def privileged(metadata: Pod, spec: Pod) -> list[str]:
    """Privileged Containers: securityContext.privileged undefined or false."""
    return [_named(c, "is privileged") for c in containers(spec) if security(c).get("privileged")]


# The capabilities a container may add at baseline: the runtime's default set.
BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)


def capabilities_baseline(metadata: Pod, spec: Pod) -> list[str]:
    """Capabilities: capabilities.add undefined, empty, or only from the default set."""
    found = []
    for c in containers(spec):
        added = set((security(c).get("capabilities") or {}).get("add") or []) - BASELINE_CAPABILITIES
        if added:
            found.append(_named(c, f"adds {sorted(added)}"))
    return found


def host_path_volumes(metadata: Pod, spec: Pod) -> list[str]:
    """HostPath Volumes: no volume of type hostPath."""
    return [f"volume {v.get('name')!r} is a hostPath" for v in spec.get("volumes") or [] if "hostPath" in v]


def host_ports(metadata: Pod, spec: Pod) -> list[str]:
    """Host Ports: ports[*].hostPort undefined or 0."""
    return [
        _named(c, f"asks for host port {port['hostPort']}")
        for c in containers(spec)
        for port in c.get("ports") or []
        if port.get("hostPort")
    ]


APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"
APPARMOR_TYPES = frozenset({"RuntimeDefault", "Localhost"})


def app_armor(metadata: Pod, spec: Pod) -> list[str]:
    """AppArmor: appArmorProfile.type of the pod and of every container RuntimeDefault, Localhost or undefined; the
    beta annotations runtime/default, localhost/<profile> or empty (never unconfined)."""
    found = []
    holders = [("the pod", security(spec)), *((f"container {c.get('name')!r}", security(c)) for c in containers(spec))]
    for who, context in holders:
        profile = context.get("appArmorProfile")
        if profile is not None and profile.get("type") not in APPARMOR_TYPES:
            found.append(f"{who} sets the AppArmor profile {profile.get('type')!r}")
    for key, value in (metadata.get("annotations") or {}).items():
        allowed = not value or value == "runtime/default" or value.startswith("localhost/")
        if key.startswith(APPARMOR_ANNOTATION_PREFIX) and not allowed:
            found.append(f"annotation {key}={value}")
    return found


# container_engine_t since v1.31 (pod-security-admission policy/check_seLinuxOptions.go).
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})


def se_linux(metadata: Pod, spec: Pod) -> list[str]:
    """SELinux: seLinuxOptions.type of the pod and of every container empty or one of the container types; user and
    role never set."""
    found = []
    holders = [("the pod", security(spec)), *((f"container {c.get('name')!r}", security(c)) for c in containers(spec))]
    for who, context in holders:
        options = context.get("seLinuxOptions")
        if options is None:
            continue
        if (options.get("type") or "") not in SELINUX_TYPES:
            found.append(f"{who} sets the SELinux type {options['type']!r}")
        found += [f"{who} sets the SELinux {field}" for field in ("user", "role") if options.get(field)]
    return found


def proc_mount_baseline(metadata: Pod, spec: Pod) -> list[str]:
    """/proc Mount Type: procMount undefined or Default, unless the pod runs in a user namespace (v1.35)."""
    if _user_namespace(spec):
        return []
    return proc_mount_restricted(metadata, spec)


SECCOMP_TYPES = frozenset({"RuntimeDefault", "Localhost"})


def seccomp_baseline(metadata: Pod, spec: Pod) -> list[str]:
    """Seccomp: seccompProfile.type of the pod and of every container RuntimeDefault, Localhost or undefined (never
    Unconfined)."""
    found = []
    holders = [("the pod", security(spec)), *((f"container {c.get('name')!r}", security(c)) for c in containers(spec))]
    for who, context in holders:
        profile = context.get("seccompProfile")
        if profile is not None and profile.get("type") not in SECCOMP_TYPES:
            found.append(f"{who} runs under the seccomp profile {profile.get('type')!r}")
    return found


# The sysctls namespaced in the pod and isolated from the node's other pods, as of v1.32 (ip_local_reserved_ports
# since v1.27, the tcp_keepalive_*/tcp_fin_timeout since v1.29, tcp_rmem/tcp_wmem since v1.32: check_sysctls.go).
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
        "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_wmem",
    }
)


def sysctls(metadata: Pod, spec: Pod) -> list[str]:
    """Sysctls: spec.securityContext.sysctls[*].name only from the safe set."""
    return [
        f"the pod sets the sysctl {s.get('name')!r}"
        for s in security(spec).get("sysctls") or []
        if s.get("name") not in SAFE_SYSCTLS
    ]


PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
LIFECYCLE_HANDLERS = ("postStart", "preStop")


def host_probes_and_lifecycle(metadata: Pod, spec: Pod) -> list[str]:
    """Host Probes / Lifecycle Hooks (v1.34): the host of every probe's and lifecycle hook's httpGet and tcpSocket
    undefined or empty, so the kubelet never calls another host on the pod's behalf."""
    found = []
    for c in containers(spec):
        handlers = [(probe, c.get(probe)) for probe in PROBES]
        handlers += [(f"lifecycle.{hook}", (c.get("lifecycle") or {}).get(hook)) for hook in LIFECYCLE_HANDLERS]
        for where, handler in handlers:
            for action in ("httpGet", "tcpSocket"):
                host = ((handler or {}).get(action) or {}).get("host")
                if host:
                    found.append(_named(c, f"{where}.{action} calls host {host!r}"))
    return found


# --- Restricted ------------------------------------------------------------------------------

# The volume types restricted allows: the eight the standard lists, and image, which the admission of v1.36 admits
# too (check_restrictedVolumes.go at v0.36.2). A persistentVolumeClaim is allowed whatever volume backs it.
RESTRICTED_VOLUME_TYPES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "image",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)


def volume_types(metadata: Pod, spec: Pod) -> list[str]:
    """Volume Types: every volume of one of the allowed types."""
    found = []
    for volume in spec.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds or not kinds <= RESTRICTED_VOLUME_TYPES:
            found.append(f"volume {volume.get('name')!r} is of type {sorted(kinds) or 'unknown'}")
    return found


def privilege_escalation(metadata: Pod, spec: Pod) -> list[str]:
    """Privilege Escalation: allowPrivilegeEscalation set to false in every container (not merely left out)."""
    if _windows(spec):
        return []
    return [
        _named(c, "may gain privileges (allowPrivilegeEscalation is not false)")
        for c in containers(spec)
        if security(c).get("allowPrivilegeEscalation") is not False
    ]


def run_as_non_root(metadata: Pod, spec: Pod) -> list[str]:
    """Running as Non-root: runAsNonRoot true on the pod (a container may then leave it unset) or on every container;
    never false. Any value in a user namespace (v1.35)."""
    if _user_namespace(spec):
        return []
    pod = security(spec).get("runAsNonRoot")
    found = ["the pod sets runAsNonRoot false"] if pod is False else []
    for c in containers(spec):
        value = security(c).get("runAsNonRoot")
        if value is False:
            found.append(_named(c, "sets runAsNonRoot false"))
        elif value is None and pod is not True:
            found.append(_named(c, "may run as root (runAsNonRoot is set neither on it nor on the pod)"))
    return found


def run_as_user(metadata: Pod, spec: Pod) -> list[str]:
    """Running as Non-root user (v1.23): runAsUser of the pod and of every container never 0. Any value in a user
    namespace (v1.35)."""
    if _user_namespace(spec):
        return []
    found = ["the pod sets runAsUser 0"] if security(spec).get("runAsUser") == 0 else []
    return found + [_named(c, "sets runAsUser 0") for c in containers(spec) if security(c).get("runAsUser") == 0]


def seccomp_restricted(metadata: Pod, spec: Pod) -> list[str]:
    """Seccomp (v1.19): seccompProfile.type RuntimeDefault or Localhost on the pod (a container may then leave it
    unset) or on every container; never anything else."""
    if _windows(spec):
        return []
    pod_profile = security(spec).get("seccompProfile")
    pod_type = (pod_profile or {}).get("type")
    found = [] if pod_profile is None or pod_type in SECCOMP_TYPES else [f"the pod runs under {pod_type!r}"]
    for c in containers(spec):
        profile = security(c).get("seccompProfile")
        if profile is not None and profile.get("type") not in SECCOMP_TYPES:
            found.append(_named(c, f"runs under the seccomp profile {profile.get('type')!r}"))
        elif profile is None and pod_type not in SECCOMP_TYPES:
            found.append(_named(c, "has no seccomp profile (set neither on it nor on the pod)"))
    return found


def capabilities_restricted(metadata: Pod, spec: Pod) -> list[str]:
    """Capabilities (v1.22): every container drops ALL and adds nothing but NET_BIND_SERVICE."""
    if _windows(spec):
        return []
    found = []
    for c in containers(spec):
        capabilities = security(c).get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            found.append(_named(c, "does not drop ALL capabilities"))
        added = set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"}
        if added:
            found.append(_named(c, f"adds {sorted(added)}"))
    return found


def proc_mount_restricted(metadata: Pod, spec: Pod) -> list[str]:
    """/proc Mount Type at restricted (v1.35): procMount undefined or Default, user namespace or not."""
    return [
        _named(c, f"mounts /proc as {security(c)['procMount']!r}")
        for c in containers(spec)
        if security(c).get("procMount") not in (None, "Default")
    ]


@dataclass(frozen=True)
class Control:
    name: str  # the standard's name of the control
    level: str  # the weakest level that holds it
    check: Callable[[Pod, Pod], list[str]]


CONTROLS = (
    Control("HostProcess", BASELINE, host_process),
    Control("Host Namespaces", BASELINE, host_namespaces),
    Control("Privileged Containers", BASELINE, privileged),
    Control("Capabilities", BASELINE, capabilities_baseline),
    Control("HostPath Volumes", BASELINE, host_path_volumes),
    Control("Host Ports", BASELINE, host_ports),
    Control("Host Probes / Lifecycle Hooks", BASELINE, host_probes_and_lifecycle),
    Control("AppArmor", BASELINE, app_armor),
    Control("SELinux", BASELINE, se_linux),
    Control("/proc Mount Type", BASELINE, proc_mount_baseline),
    Control("Seccomp", BASELINE, seccomp_baseline),
    Control("Sysctls", BASELINE, sysctls),
    Control("Volume Types", RESTRICTED, volume_types),
    Control("Privilege Escalation", RESTRICTED, privilege_escalation),
    Control("Running as Non-root", RESTRICTED, run_as_non_root),
    Control("Running as Non-root user", RESTRICTED, run_as_user),
    Control("Seccomp (restricted)", RESTRICTED, seccomp_restricted),
    Control("Capabilities (restricted)", RESTRICTED, capabilities_restricted),
    Control("/proc Mount Type (restricted)", RESTRICTED, proc_mount_restricted),
)
LEVELS = (BASELINE, RESTRICTED)  # the weaker first


def violations(level: str, metadata: Pod, spec: Pod) -> list[tuple[str, str]]:
    """(control, what breaks it) for every control of ``level`` (and of the weaker levels) the pod breaks."""
    held = LEVELS[: LEVELS.index(level) + 1]
    return [(c.name, problem) for c in CONTROLS if c.level in held for problem in c.check(metadata, spec)]

"""In-cluster configuration: reaching the API server of the cluster a pod runs in.

Inside a pod there is no kubeconfig file; the kubelet mounts the pod's ServiceAccount
credentials at :data:`MOUNT` (``token``, ``ca.crt``, ``namespace``) and sets
``KUBERNETES_SERVICE_HOST``/``KUBERNETES_SERVICE_PORT``. :func:`config` turns those into
the same :class:`~federation.contexts.kubeconfig.KubeConfig` value a file gives (one
context, :data:`CONTEXT`), so nothing downstream knows the difference:

- the token is a ``tokenFile``: :class:`~federation.contexts.credentials.TokenFileCredentials`
  re-reads it every minute and after a 401, so a token the kubelet rotates (bound tokens
  live an hour and are refreshed at 80% of that) is picked up without a restart, as
  client-go's in-cluster config does;
- the CA is read once (the kubelet does not rotate it under a running pod);
- the namespace file becomes the context's namespace.

:func:`load` is the rule ``fedctl`` commands follow, client-go's: an explicit
``--kubeconfig`` or ``$KUBECONFIG`` wins; else ``~/.kube/config`` when it exists; else the
in-cluster configuration when ``KUBERNETES_SERVICE_HOST`` says we are in a pod; else the
missing default file is the error. Anything missing is a one-line error naming it.

Where the mount is read from is :data:`MOUNT`, unless :data:`MOUNT_VARIABLE` names another
absolute directory: the local fleet's pod runner (:mod:`federation.local.pods`) cannot
write ``/var/run/secrets``, so it writes the same three files elsewhere and says where.
The variable moves the mount and does nothing else: the files are read, checked and
rotated exactly as at :data:`MOUNT`. A relative path is an error, not a fallback.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from federation.contexts import kubeconfig

MOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where the kubelet mounts a pod's ServiceAccount token, CA and namespace."""
MOUNT_VARIABLE = "FEDERATION_SERVICE_ACCOUNT_MOUNT"
"""An absolute directory read instead of :data:`MOUNT` (the local fleet's pod runner)."""
CONTEXT = "in-cluster"
"""The one context of the in-cluster configuration (``--hub-context in-cluster``)."""
HOST_VARIABLE = "KUBERNETES_SERVICE_HOST"
PORT_VARIABLE = "KUBERNETES_SERVICE_PORT"


def in_pod(env: Mapping[str, str] | None = None) -> bool:
    """Whether the process runs in a pod (the kubelet set the service variables)."""
    env = os.environ if env is None else env
    return bool(env.get(HOST_VARIABLE))


def mount_of(env: Mapping[str, str] | None = None) -> Path:
    """:data:`MOUNT`, or the directory :data:`MOUNT_VARIABLE` names (absolute only)."""
    env = os.environ if env is None else env
    moved = env.get(MOUNT_VARIABLE)
    if not moved:
        return MOUNT
    if not Path(moved).is_absolute():
        raise kubeconfig.KubeconfigError(f"in-cluster configuration: {MOUNT_VARIABLE} must "
                                         "be an absolute directory")
    return Path(moved)


def config(env: Mapping[str, str] | None = None,
           mount: Path | None = None) -> kubeconfig.KubeConfig:
    """The in-cluster configuration; :class:`KubeconfigError` names what is missing.
    ``mount``: where the token, CA and namespace are (default: :func:`mount_of`)."""
    env = os.environ if env is None else env
    mount = mount_of(env) if mount is None else mount
    host, port = env.get(HOST_VARIABLE, ""), env.get(PORT_VARIABLE, "")
    if not host or not port:
        missing = " and ".join(v for v, value in ((HOST_VARIABLE, host), (PORT_VARIABLE, port))
                               if not value)
        raise kubeconfig.KubeconfigError(
            f"in-cluster configuration: {missing} not set (not running in a pod?)")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise kubeconfig.KubeconfigError(f"in-cluster configuration: {PORT_VARIABLE} is not "
                                         "a port number")
    token, ca = mount / "token", mount / "ca.crt"
    for required in (token, ca):
        if not _is_file(required):
            raise kubeconfig.KubeconfigError(
                f"in-cluster configuration: {required} is missing or unreadable (is the "
                "ServiceAccount token mounted? automountServiceAccountToken must not be false)")
    namespace = _namespace(mount) or "default"
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    return kubeconfig.KubeConfig(
        clusters={CONTEXT: {"server": server, "certificate-authority": str(ca)}},
        users={CONTEXT: {"tokenFile": str(token)}},
        contexts={CONTEXT: {"cluster": CONTEXT, "user": CONTEXT, "namespace": namespace}},
        current_context=CONTEXT, sources=(mount,))


def _is_file(path: Path) -> bool:
    """Whether ``path`` is a file we may look at: a directory we may not enter (EACCES, which
    Python 3.11's ``is_file`` raises) counts as absent, so the caller names it in one line."""
    try:
        return path.is_file()
    except OSError:
        return False


def _namespace(mount: Path) -> str | None:
    try:
        return (mount / "namespace").read_text().strip() or None
    except OSError:
        return None


def namespace(mount: Path | None = None) -> str | None:
    """The pod's namespace from the mount, or None outside a pod (or when unreadable)."""
    if mount is None:
        try:
            mount = mount_of()
        except kubeconfig.KubeconfigError:
            return None
    return _namespace(mount)


def load(explicit: str | Path | None = None, env: Mapping[str, str] | None = None,
         mount: Path | None = None) -> kubeconfig.KubeConfig:
    """Kubeconfig files as kubectl finds them, else the in-cluster configuration in a pod."""
    env = os.environ if env is None else env
    if explicit is not None or env.get("KUBECONFIG"):
        return kubeconfig.load(explicit, env)
    default = kubeconfig.default_paths(None, env)[0]
    try:
        found = default.exists()
    except OSError:  # a HOME we may not read (another uid's): as absent, named below
        found = False
    if not found and in_pod(env):
        return config(env, mount)
    if not found:
        raise kubeconfig.KubeconfigError(
            f"no kubeconfig: give --kubeconfig, set KUBECONFIG or create {default} (inside "
            f"a pod, {HOST_VARIABLE} and the ServiceAccount mount are used instead)")
    return kubeconfig.load(explicit, env)

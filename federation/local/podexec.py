"""The local pod runner's container launcher: the security settings a process can take on.

``python -m federation.local.podexec [--no-new-privileges] [--drop-capabilities] -- ARGV``
applies what the container's ``securityContext`` asks and a process can do to itself, then
``exec``\\ s ARGV (so the pid, and the pid file of :mod:`federation.local.processes`, stay
the container's):

- ``allowPrivilegeEscalation: false`` is ``prctl(PR_SET_NO_NEW_PRIVS)``, what runc does
  for it: no setuid program or file capability gives ARGV more than it has;
- ``capabilities: {drop: [ALL]}`` empties the bounding set and the effective, permitted
  and inheritable sets (``capset``), so a runner started as root runs the container as a
  uid 0 without any capability, as a container with every capability dropped is.

Anything that fails is an error on stderr and exit status 126 (the container does not
start), never a container running with less isolation than asked.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Sequence

PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24
CAPABILITY_VERSION_3 = 0x20080522
LAST_CAPABILITY = 63
"""Dropped one by one until the kernel says there are no more (EINVAL)."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def no_new_privileges() -> None:
    if _libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")


def drop_capabilities() -> None:
    libc = _libc()
    for capability in range(LAST_CAPABILITY + 1):
        if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            errno = ctypes.get_errno()
            if errno == 22:  # EINVAL: past the kernel's last capability
                break
            if errno != 1:  # EPERM: we had no CAP_SETPCAP, so nothing to drop from
                raise OSError(errno, f"prctl(PR_CAPBSET_DROP, {capability})")
    header = (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: all empty
    if libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    try:
        split = args.index("--")
    except ValueError:
        print("usage: podexec [--no-new-privileges] [--drop-capabilities] -- ARGV",
              file=sys.stderr)
        return 2
    options, command = set(args[:split]), args[split + 1:]
    unknown = options - {"--no-new-privileges", "--drop-capabilities"}
    if unknown or not command:
        print(f"podexec: unknown option {sorted(unknown)[0]}" if unknown
              else "podexec: no command", file=sys.stderr)
        return 2
    try:
        if "--no-new-privileges" in options:
            no_new_privileges()
        if "--drop-capabilities" in options:
            drop_capabilities()
        os.execv(command[0], command)
    except OSError as exc:
        print(f"podexec: {exc.filename or command[0]}: {os.strerror(exc.errno or 0)}",
              file=sys.stderr)
        return 126


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Why talking to a worker failed: exceptions from paramiko, sockets and SFTP as an error kind and text."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Protocol

from orchestrator.errors import HostKeyError, OrchError
from orchestrator.workers import WorkerRef


class Reaching(Protocol):
    """What a failure's text names of its transport: the workers, known_hosts, the connect timeout."""

    @property
    def workers(self) -> Mapping[str, WorkerRef]: ...

    @property
    def known_hosts_display(self) -> str: ...

    @property
    def connect_timeout(self) -> float: ...


def _sftp_refusal(exc: BaseException) -> str | None:
    """The SFTP server's own error for a request it refused, or None if it did not refuse one.

    paramiko raises the server's status replies (no such file, permission
    denied, the generic "Failure" of a full disk) as IOError/OSError, the same
    types as a broken socket; only where they were raised tells them apart.
    """
    import paramiko

    if isinstance(exc, paramiko.SFTPError):
        return str(exc)
    if isinstance(exc, OSError) and str(exc).startswith("size mismatch in put"):
        return f"{exc} (the worker stored fewer bytes than were sent: disk full?)"
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name == "_convert_status" and code.co_filename.endswith("sftp_client.py"):
            text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            if text.strip().lower() == "failure":
                return "Failure (the SFTP server gives no detail; usually a full disk or quota)"
            return text
        tb = tb.tb_next
    return None


def classify_exception(exc: BaseException, transport: Reaching, name: str) -> tuple[str, str]:
    """(error_kind, human text) for an exception raised while talking to a worker."""
    import socket

    import paramiko

    inner = _thread_failure(exc)
    if inner is not None:  # a failure in one of invoke's stdin/output threads: say what it was
        return classify_exception(inner, transport, name)
    w = transport.workers.get(name)
    target = f"{w.host}:{w.port or 22}" if w else name
    if isinstance(exc, HostKeyError):
        return "host-key", f"{exc.message} -- {exc.hint}"
    if isinstance(exc, paramiko.BadHostKeyException):
        known = exc.hostname
        return "host-key", (
            f"HOST KEY CHANGED for {known}: known_hosts has {exc.expected_key.get_name()} "
            f"{exc.expected_key.fingerprint}, the worker offered {exc.key.get_name()} {exc.key.fingerprint}; "
            f"refusing to connect. A re-created VM (preemption, maintenance) comes back with a new key and "
            f"an empty disk; so does someone in between. Verify the new key out of band, then: "
            f"orch fleet trust {shlex.quote(name)} (or ssh-keygen -f {shlex.quote(transport.known_hosts_display)} "
            f"-R {shlex.quote(known)})"
        )
    if isinstance(exc, paramiko.AuthenticationException):
        return "auth", f"authentication failed for {w.user if w and w.user else 'the ssh user'}@{target}: {exc}"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timeout", f"connect to {target} timed out after {transport.connect_timeout:g}s"
    if isinstance(exc, paramiko.SSHException) and (
        "banner" in str(exc).lower() or "no existing session" in str(exc).lower()
    ):
        return "timeout", (
            f"no SSH banner from {target} within {transport.connect_timeout:g}s (host hung or overloaded)"
        )
    if isinstance(exc, paramiko.SSHException) and "timeout opening channel" in str(exc).lower():
        return "timeout", (
            f"{target} opened no SSH channel within {transport.connect_timeout:g}s (host hung or overloaded)"
        )
    if isinstance(exc, (ConnectionRefusedError,)):
        return "connect", f"connection to {target} refused (sshd not running?)"
    if isinstance(exc, (OSError, paramiko.SSHException, EOFError)):
        return "connect", f"cannot reach {target}: {exc.__class__.__name__}: {exc}"
    if isinstance(exc, OrchError):
        return "local", str(exc)
    return "local", f"{exc.__class__.__name__}: {exc}"


def _thread_failure(exc: BaseException) -> BaseException | None:
    """The first exception inside invoke's ThreadException (which renders whole tracebacks), if `exc` is one."""
    if type(exc).__name__ != "ThreadException" or not type(exc).__module__.startswith("invoke"):
        return None
    wrapped = [getattr(e, "value", None) for e in getattr(exc, "exceptions", ())]
    return next((e for e in wrapped if isinstance(e, BaseException)), None)

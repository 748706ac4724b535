"""The probe's device check: accelerator nodes and who has them open, libtpu's lockfile, tpu-info.

Who holds a device or the lockfile comes from `hostside.procfs`, the same
answer the launch preflight gets.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from typing import Any

from hostside import procfs
from hostside.layout import LIBTPU_LOCKFILE
from hostside.probe_check import Check


def lockfile_state(exists: bool, holders: list[dict[str, Any]]) -> dict[str, Any]:
    """absent | held (by other processes) | stale (exists, nobody holds it)."""
    if not exists:
        return {"state": "absent", "holders": []}
    return {"state": "held" if holders else "stale", "holders": holders}


def process_command(pid: int, limit: int = 200) -> str:
    """A process's command line, or '?' when it cannot be read."""
    text = procfs.cmdline(pid) if pid > 0 else ""
    return (text[:limit] + "...") if len(text) > limit else (text or "?")


def check_device(req: dict[str, Any], state: dict[str, Any]) -> Check:
    """Chip device nodes and who has them open, the libtpu lockfile and its holders, tpu-info's answer."""
    c = Check("device")
    platform = req.get("platform")
    nodes = sorted(glob.glob("/dev/accel*") + glob.glob("/dev/vfio/*"))
    chips = [n for n in nodes if procfs.is_chip_device(n)]
    scan = procfs.device_holders()
    held: dict[str, list[int]] = {}
    for pid, devices in sorted(scan.holders.items()):
        for node in devices:
            held.setdefault(node, []).append(pid)
    c.data["device_nodes"] = nodes
    c.data["device_holders"] = {
        n: [{"pid": p, "command": process_command(p)} for p in pids] for n, pids in held.items()
    }
    if scan.uninspected:
        c.data["uninspected_processes"] = scan.uninspected
    parts = [f"{len(chips)} accelerator node(s)" if chips else "no accelerator nodes"]
    for node, pids in sorted(held.items()):
        for pid in pids:
            c.mark(
                "fail" if platform == "tpu" else "warn",
                f"{node} is open in pid {pid} ({process_command(pid)})",
                layer="device-ownership",
            )
    if platform == "tpu" and not chips:
        c.mark("warn", "no /dev/accel* or /dev/vfio/* device nodes: this host shows no TPU chips")

    lockfile = str(req.get("lockfile", LIBTPU_LOCKFILE))
    try:
        os.stat(lockfile)
        exists = True
    except FileNotFoundError:
        exists = False
    except OSError as exc:
        exists = True
        c.mark("warn", f"cannot stat {lockfile}: {exc}")
    holders = [{"pid": pid, "command": process_command(pid)} for pid in procfs.lock_holders(lockfile)]
    lock = lockfile_state(exists, holders)
    c.data["lockfile"] = {"path": lockfile, **lock}
    if lock["state"] == "held":
        for h in lock["holders"]:
            c.mark(
                "fail" if platform == "tpu" else "warn",
                f"libtpu lockfile {lockfile} is held by pid {h['pid']} ({h['command']}): another process owns the TPU",
                layer="device-ownership",
            )
        parts.append(f"lockfile held by pid {', '.join(str(h['pid']) for h in lock['holders'])}")
    elif lock["state"] == "stale":
        c.mark(
            "warn",
            f"stale libtpu lockfile {lockfile}: exists but no process holds it (left by a killed "
            f"process; harmless, the next libtpu process takes it over)",
        )
        parts.append("stale lockfile")
    else:
        parts.append("no lockfile")

    tool = shutil.which("tpu-info")
    if not tool and state.get("env"):
        candidate = os.path.join(state["env"], "bin", "tpu-info")
        tool = candidate if os.access(candidate, os.X_OK) else None
    if tool:
        try:
            out = subprocess.run([tool], capture_output=True, text=True, timeout=20)
            text = (out.stdout + out.stderr).strip()
            c.data["tpu_info"] = {"path": tool, "exit_code": out.returncode, "output": text[-2000:]}
            first = text.splitlines()[0] if text else ""
            parts.append(f"tpu-info: {first[:80]}")
            if platform == "tpu" and "No TPU chips found" in text:
                c.mark("warn", f"tpu-info: {first}")
        except (OSError, subprocess.TimeoutExpired) as exc:
            c.data["tpu_info"] = {"path": tool, "error": str(exc)}
            c.mark("warn", f"tpu-info did not answer: {exc}")
    c.summary = ", ".join(parts)
    return c

"""Prove what a worker can run: `python3 -m hostside.probe [REQUEST.json | - | --request JSON]`.

Reads one JSON request (a file, stdin, or the argument after --request) and prints one JSON
document with a list of checks, each `{name, status, summary, evidence,
elapsed, data}` where status is ok, warn, fail or skip:

    host     hostname, Python, free disk at the worker root, clock offset
    bundle   the lane's active bundle and the installed frontend/libtpu
             versions vs the bundle manifest and the fleet's pins
    device   accelerator device nodes and their holders, the libtpu
             lockfile (absent, held by which pid, or stale), tpu-info
    runtime  (deep) each frontend imported in a subprocess of the bundle's
             Python with the lane's policy applied before import: devices,
             a small computation, and the platform that actually answered
    cache    the lane's cache directories and their permissions

Request keys (all optional except root): root, lane, platform ("tpu" or
"cpu"), bundle {name, pins}, frontends, policy {env, forbid}, deep,
runtime_timeout, deadline, controller_time, caches [{frontend, path,
expect}], min_free_bytes, clock_warn_seconds.

Stdlib only: this runs under the worker's plain Python. Frontends are only
ever imported inside the child process of the runtime check.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from hostside import SCHEMA_VERSION, redact
from hostside.facts import collect
from hostside.layout import LIBTPU_LOCKFILE, Layout

STATUSES = ("ok", "skip", "warn", "fail")
# Distributions whose versions make up a bundle's identity (normalized names).
TRACKED = ("torch", "torch-xla", "jax", "jaxlib", "libtpu", "libtpu-nightly", "torch-tpu")
# frontend module -> distribution that provides it
FRONTEND_DISTS = {"jax": "jax", "torch_xla": "torch-xla", "torch_tpu": "torch-tpu", "torch": "torch"}
RESULT_MARK = "ORCH-PROBE-RESULT "
DEFAULT_MIN_FREE = 2 * 1024**3
DEFAULT_CLOCK_WARN = 2.0
# Log lines worth showing as evidence out of a frontend's stderr.
KEY_LINE = re.compile(
    r"Unable to initialize backend|TPU initialization failed|jellyfish|lockfile|already in use|"
    r"Failed to get (global )?TPU topology|[Ff]alling back|libtpu|PJRT|Error\b|error:|"
    r"ABORTED|NOT_FOUND|INTERNAL|UNAVAILABLE|DEADLINE_EXCEEDED|RESOURCE_EXHAUSTED|UNIMPLEMENTED|"
    r"out of memory|Killed|^[EF]\d{4} "
)
NOISE_LINE = re.compile(r"^I\d{4} |argv\[\d+\]")


# ---------------------------------------------------------------------------
# Pure helpers (tested from captured text)


def normalize(name: str) -> str:
    """PEP 503 name normalization: 'Torch_XLA' -> 'torch-xla'."""
    return re.sub(r"[-_.]+", "-", name).lower()


def same_version(a: str, b: str) -> bool:
    """Exact versions, tolerant of trailing '.0' release parts and case ('2.9' == '2.9.0')."""

    def key(v: str):
        v = v.strip().lower().lstrip("v")
        local = ""
        if "+" in v:
            v, local = v.split("+", 1)
        m = re.match(r"^(\d+(?:\.\d+)*)(.*)$", v)
        if not m:
            return (v, local)
        release = [int(p) for p in m.group(1).split(".")]
        while len(release) > 1 and release[-1] == 0:
            release.pop()
        return (tuple(release), m.group(2), local)

    return key(a) == key(b)


def parse_proc_locks(text: str) -> list[dict]:
    """Entries of /proc/locks: pid, lock kind, access, device and inode; waiters marked `blocked`.

    A line reads `1: POSIX  ADVISORY  WRITE 9018 fe:00:2146719 0 EOF`, or with
    `->` after the id for a process waiting on that lock. The device is
    MAJOR:MINOR in hex, the inode decimal.
    """
    entries = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 6 or not parts[0].endswith(":"):
            continue
        blocked = parts[1] == "->"
        fields = parts[2:] if blocked else parts[1:]
        if len(fields) < 5:
            continue
        kind, mode, access, pid_text, where = fields[:5]
        m = re.fullmatch(r"([0-9a-fA-F]+):([0-9a-fA-F]+):(\d+)", where)
        if not m:
            continue
        try:
            pid = int(pid_text)
        except ValueError:
            continue
        entries.append(
            {
                "pid": pid,
                "kind": kind,
                "mode": mode,
                "access": access,
                "blocked": blocked,
                "major": int(m.group(1), 16),
                "minor": int(m.group(2), 16),
                "inode": int(m.group(3)),
            }
        )
    return entries


def lock_holders(entries: list[dict], inode: int, major: int | None = None, minor: int | None = None) -> list[int]:
    """Pids holding (not waiting for) a lock on the file with this inode (and device, when it matches)."""
    held = [e for e in entries if not e["blocked"] and e["inode"] == inode]
    exact = [e for e in held if e["major"] == major and e["minor"] == minor]
    # Some filesystems report a different device in /proc/locks than stat()
    # does (btrfs subvolumes, overlays); fall back to the inode alone.
    chosen = exact or held
    return sorted({e["pid"] for e in chosen})


def lockfile_state(exists: bool, holders: list[dict], own_pids: set[int] = frozenset()) -> dict:
    """absent | held (by other processes) | stale (exists, nobody holds it)."""
    if not exists:
        return {"state": "absent", "holders": []}
    others = [h for h in holders if h["pid"] not in own_pids]
    return {"state": "held" if others else "stale", "holders": others}


def key_lines(text: str, limit: int = 12) -> list[str]:
    """The lines of a runtime's log that explain what happened, in order, without duplicates."""
    seen, out = set(), []
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line or NOISE_LINE.search(line) or not KEY_LINE.search(line):
            continue
        if line not in seen:
            seen.add(line)
            out.append(line[:500])
    return out[-limit:]


def parse_runtime_output(
    frontend: str,
    stdout: str,
    stderr: str,
    exit_code: int | None,
    *,
    intended: str | None,
    timed_out: float | None = None,
    extra_log: str = "",
) -> dict:
    """Judge one frontend's runtime child from what it printed.

    Returns {frontend, status, summary, evidence, result}. A frontend that ran
    but answered from a platform other than the intended one is a failure
    (silent fallback), with the runtime's own log lines as evidence.
    """
    result = None
    for line in stdout.splitlines():
        if line.startswith(RESULT_MARK):
            try:
                result = json.loads(line[len(RESULT_MARK) :])
            except json.JSONDecodeError:
                pass
    logs = key_lines(stderr + "\n" + extra_log)
    tail = [ln for ln in stderr.rstrip().splitlines() if ln.strip() and not NOISE_LINE.search(ln)][-5:]
    if timed_out is not None:
        return {
            "frontend": frontend,
            "status": "fail",
            "result": result,
            "summary": f"{frontend}: no answer within {timed_out:g}s (killed); the runtime hung",
            "evidence": logs or tail,
        }
    if result is None or result.get("error"):
        error = (result or {}).get("error") or f"exited {exit_code} without a result"
        evidence = [error] + [ln for ln in logs if ln != error]
        if not logs:
            evidence += [ln for ln in tail if ln != error]
        return {
            "frontend": frontend,
            "status": "fail",
            "result": result,
            "summary": f"{frontend}: {error.splitlines()[0][:300]}",
            "evidence": evidence,
        }
    platform = str(result.get("platform") or "").lower()
    kind = result.get("device_kind") or platform
    count = result.get("device_count")
    answered = f"{count} {kind} device(s)" if count is not None else kind
    if not result.get("computed"):
        return {
            "frontend": frontend,
            "status": "fail",
            "result": result,
            "summary": f"{frontend}: {answered}, but the test computation gave {result.get('value')!r} "
            f"(expected {result.get('expected')!r})",
            "evidence": logs,
        }
    if intended and platform != intended:
        return {
            "frontend": frontend,
            "status": "fail",
            "result": result,
            "summary": f"{frontend} {result.get('version', '')}: intended {intended}, answered from "
            f"{platform or '?'} ({answered}): silent fallback",
            "evidence": logs or ["(the runtime logged no reason)"],
        }
    return {
        "frontend": frontend,
        "status": "ok",
        "result": result,
        "summary": f"{frontend} {result.get('version', '')}: {answered}, computation ok",
        "evidence": [],
    }


def worst(statuses) -> str:
    """The most severe of some statuses (ok < skip < warn < fail); ok for none."""
    ranked = [s for s in statuses if s in STATUSES]
    return max(ranked, key=STATUSES.index) if ranked else "ok"


def compare_distributions(
    installed: dict[str, str], manifest: dict[str, str] | None, pins: dict[str, str] | None
) -> list[str]:
    """Differences between what is installed and what the manifest and the fleet's pins say."""
    problems = []
    for source, wanted in (("the bundle manifest", manifest), ("the fleet pins", pins)):
        for name, version in sorted((wanted or {}).items()):
            have = installed.get(normalize(name))
            if have is None:
                problems.append(f"{normalize(name)} {version} is in {source} but not installed")
            elif not same_version(have, version):
                problems.append(f"{normalize(name)} installed {have}, {source} says {version}")
    return problems


# ---------------------------------------------------------------------------
# Reading the worker


def installed_distributions(env_dir: str) -> dict[str, str]:
    """{normalized name: version} from the dist-info directories of an environment."""
    found: dict[str, str] = {}
    for meta in sorted(glob.glob(os.path.join(env_dir, "lib", "python*", "site-packages", "*.dist-info", "METADATA"))):
        name = version = None
        try:
            with open(meta, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if line.startswith("Name:") and name is None:
                        name = line.split(":", 1)[1].strip()
                    elif line.startswith("Version:") and version is None:
                        version = line.split(":", 1)[1].strip()
                    elif not line.strip():
                        break
        except OSError:
            continue
        if name and version:
            found[normalize(name)] = version
    return found


def process_command(pid: int, limit: int = 200) -> str:
    """A process's command line, or '?' when it cannot be read."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            raw = fh.read()
    except OSError:
        return "?"
    text = " ".join(p.decode(errors="replace") for p in raw.split(b"\0") if p)
    return (text[:limit] + "...") if len(text) > limit else (text or "?")


def open_file_holders(paths: set[str]) -> tuple[dict[str, list[int]], int]:
    """{path: [pids]} for processes with one of `paths` open, and how many processes could not be read."""
    holders: dict[str, list[int]] = {p: [] for p in paths}
    hidden = 0
    if not paths:
        return holders, 0
    for pid_dir in glob.glob("/proc/[0-9]*"):
        pid = int(os.path.basename(pid_dir))
        try:
            fds = os.listdir(f"{pid_dir}/fd")
        except OSError:
            hidden += 1
            continue
        for fd in fds:
            try:
                target = os.readlink(f"{pid_dir}/fd/{fd}")
            except OSError:
                continue
            if target in holders and pid not in holders[target]:
                holders[target].append(pid)
    return holders, hidden


def own_process_ids() -> set[int]:
    """This probe and its ancestors (the SSH session), never counted as holders."""
    pids, pid = set(), os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as fh:
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def active_env(root: str, lane: str) -> tuple[str | None, str | None]:
    """(bundle id, environment directory) of a lane's active link, or (None, None)."""
    link = Layout(root).active(lane)
    if os.path.islink(link):
        target = os.path.join(os.path.dirname(link), os.readlink(link))
    elif os.path.isdir(link):
        target = link
    else:
        return None, None
    target = os.path.normpath(target)
    return os.path.basename(target.rstrip("/")), target


# ---------------------------------------------------------------------------
# Checks


class Check:
    """Accumulates one check's outcome and times it."""

    def __init__(self, name: str):
        self.name = name
        self.status = "ok"
        self.summary = ""
        self.evidence: list[str] = []
        self.data: dict = {}
        self.layer: str | None = None
        self.headline: str | None = None
        self._start = time.monotonic()

    def mark(self, status: str, line: str | None = None, *, layer: str | None = None) -> None:
        """Record a finding; the first line at the worst status becomes the headline."""
        if STATUSES.index(status) > STATUSES.index(self.status):
            self.status = status
            self.headline = line
            if layer:
                self.layer = layer
        elif status == self.status and self.headline is None:
            self.headline = line
        if line:
            self.evidence.append(line)

    def to_dict(self) -> dict:
        summary = self.summary or next(iter(self.evidence), "") or self.status
        doc = {
            "name": self.name,
            "status": self.status,
            "summary": summary,
            "evidence": self.evidence,
            "elapsed": round(time.monotonic() - self._start, 3),
            "data": self.data,
        }
        if self.layer:
            doc["layer"] = self.layer
        if self.headline and self.status in ("warn", "fail"):
            doc["headline"] = self.headline
        return doc


def check_host(req: dict) -> Check:
    c = Check("host")
    root = req["root"]
    facts = collect(root)
    c.data = {
        k: facts[k]
        for k in (
            "hostname",
            "python",
            "python_executable",
            "machine",
            "root_exists",
            "disk_free_bytes",
            "disk_total_bytes",
            "time",
        )
    }
    free = facts["disk_free_bytes"]
    parts = [facts["hostname"], f"python {facts['python']}", f"{free / 1024**3:.1f} GiB free at {root}"]
    min_free = int(req.get("min_free_bytes", DEFAULT_MIN_FREE))
    if free < min_free:
        c.mark(
            "warn" if free >= min_free // 4 else "fail",
            f"only {free / 1024**3:.2f} GiB free at {root} (want {min_free / 1024**3:.1f} GiB)",
            layer="other",
        )
    if not facts["root_exists"]:
        c.mark("warn", f"worker root {root} does not exist (nothing deployed yet)")
    controller_time = req.get("controller_time")
    if controller_time is not None:
        # Includes the transit time of the request (milliseconds on a warm connection).
        offset = facts["time"] - float(controller_time)
        c.data["clock_offset"] = round(offset, 3)
        parts.append(f"clock {offset:+.2f}s")
        limit = float(req.get("clock_warn_seconds", DEFAULT_CLOCK_WARN))
        if abs(offset) > limit:
            c.mark("warn", f"clock differs from the controller's by {offset:+.1f}s (more than {limit:g}s)")
    c.summary = ", ".join(parts)
    return c


def check_bundle(req: dict, state: dict) -> Check:
    c = Check("bundle")
    lane = req.get("lane")
    if not lane:
        c.status, c.summary = "skip", "worker is in no lane"
        return c
    root = req["root"]
    bundle_id, env = active_env(root, lane)
    link = Layout(root).active(lane)
    if bundle_id is None and not os.path.islink(link) and not req.get("deep", True):
        # Before the first deploy a shallow probe only asks "is the host ready for one?".
        c.mark("warn", f"lane {lane} has no bundle deployed here yet ({link} does not exist)")
        return c
    if bundle_id is None or not os.path.isdir(env):
        c.mark(
            "fail",
            f"lane {lane} has no active bundle here ({link} "
            f"{'is dangling' if os.path.islink(link) else 'does not exist'}); deploy the lane first",
            layer="bundle-skew",
        )
        return c
    state["bundle_id"], state["env"] = bundle_id, env
    python = os.path.join(env, "bin", "python")
    c.data = {"bundle_id": bundle_id, "env": env, "python": python}
    if not os.access(python, os.X_OK):
        c.mark("fail", f"bundle {bundle_id} has no Python at {python}", layer="bundle-skew")
        return c
    state["python"] = python
    installed = installed_distributions(env)
    state["installed"] = installed
    versions = {name: installed[name] for name in TRACKED if name in installed}
    c.data["versions"] = versions
    manifest = None
    manifest_path = os.path.join(env, "orch-bundle.json")
    try:
        with open(manifest_path) as fh:
            manifest = json.load(fh)
        c.data["manifest"] = {k: manifest.get(k) for k in ("schema_version", "bundle_id", "bundle", "python")}
    except FileNotFoundError:
        c.mark("warn", f"no manifest ({manifest_path}): installed versions not checked against a deploy record")
    except (OSError, ValueError) as exc:
        c.mark("warn", f"unreadable manifest {manifest_path}: {exc}")
    wanted_bundle = (req.get("bundle") or {}).get("name")
    if manifest:
        if wanted_bundle and manifest.get("bundle") and manifest["bundle"] != wanted_bundle:
            c.mark(
                "fail",
                f"lane {lane} runs bundle '{manifest['bundle']}' ({bundle_id}), the fleet says "
                f"'{wanted_bundle}'; redeploy the lane",
                layer="bundle-skew",
            )
        if manifest.get("bundle_id") and manifest["bundle_id"] != bundle_id:
            c.mark("warn", f"manifest names bundle id {manifest['bundle_id']}, the active link {bundle_id}")
    dists = manifest.get("distributions") if isinstance(manifest, dict) else None
    for problem in compare_distributions(
        installed, dists if isinstance(dists, dict) else None, (req.get("bundle") or {}).get("pins")
    ):
        c.mark("fail", problem, layer="bundle-skew")
    have = [f for f, dist in FRONTEND_DISTS.items() if dist in installed]
    for frontend in req.get("frontends") or []:
        if frontend not in have:
            c.mark(
                "fail",
                f"bundle {bundle_id} lacks frontend {frontend} "
                f"({FRONTEND_DISTS.get(frontend, frontend)} not installed)",
                layer="bundle-skew",
            )
    state["frontends"] = runtime_frontends(installed, req.get("platform"))
    shown = ", ".join(f"{k} {v}" for k, v in versions.items()) or "no tracked distributions"
    c.summary = f"{bundle_id}: {shown}"
    return c


def runtime_frontends(installed: dict[str, str], platform: str | None) -> list[str]:
    """Frontends the runtime check imports: every device frontend the bundle has.

    Plain torch only proves anything on a cpu lane, and only when no torch
    device frontend is installed (torch_xla and torch_tpu import it anyway).
    """
    out = [f for f in ("jax", "torch_xla", "torch_tpu") if FRONTEND_DISTS[f] in installed]
    if "torch" in installed and not {"torch-xla", "torch-tpu"} & set(installed) and platform != "tpu":
        out.append("torch")
    return out


def check_device(req: dict, state: dict) -> Check:
    c = Check("device")
    platform = req.get("platform")
    nodes = sorted(glob.glob("/dev/accel*") + glob.glob("/dev/vfio/*"))
    chips = [n for n in nodes if n != "/dev/vfio/vfio"]
    own = own_process_ids()
    holders, hidden = open_file_holders(set(nodes))
    held = {n: [p for p in pids if p not in own] for n, pids in holders.items()}
    c.data["device_nodes"] = nodes
    c.data["device_holders"] = {
        n: [{"pid": p, "command": process_command(p)} for p in pids] for n, pids in held.items() if pids
    }
    if hidden:
        c.data["uninspected_processes"] = hidden
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

    lockfile = req.get("lockfile", LIBTPU_LOCKFILE)
    try:
        st = os.stat(lockfile)
        exists = True
    except FileNotFoundError:
        st, exists = None, False
    except OSError as exc:
        st, exists = None, True
        c.mark("warn", f"cannot stat {lockfile}: {exc}")
    holders_info: list[dict] = []
    if st is not None:
        try:
            with open("/proc/locks") as fh:
                entries = parse_proc_locks(fh.read())
        except OSError:
            entries = []
        for pid in lock_holders(entries, st.st_ino, os.major(st.st_dev), os.minor(st.st_dev)):
            holders_info.append({"pid": pid, "command": process_command(pid) if pid > 0 else "?"})
    lock = lockfile_state(exists, holders_info, own)
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


# The child that imports one frontend under the lane's policy. It prints one
# RESULT_MARK line; everything the runtime logs goes to stderr.
RUNTIME_CHILD = r"""
import json, logging, sys, time, traceback
frontend = sys.argv[1]
MARK = sys.argv[2]
logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
# JAX reports why a backend failed to initialize only at INFO level.
for name in ("jax._src.xla_bridge", "jax._src.xla_bridge.backends"):
    logging.getLogger(name).setLevel(logging.INFO)
out = {"frontend": frontend}
start = time.monotonic()
def done(code):
    out["elapsed"] = round(time.monotonic() - start, 3)
    sys.stdout.write(MARK + json.dumps(out, default=str) + "\n")
    sys.stdout.flush()
    sys.exit(code)
try:
    if frontend == "jax":
        import jax, jax.numpy as jnp
        out["version"] = jax.__version__
        devices = jax.devices()
        out["device_count"] = len(devices)
        out["local_device_count"] = jax.local_device_count()
        out["process_count"] = jax.process_count()
        out["platform"] = devices[0].platform
        out["device_kind"] = devices[0].device_kind
        out["devices"] = [str(d) for d in devices[:8]]
        x = jnp.arange(16.0, dtype=jnp.float32).reshape(4, 4)
        value = float(jax.block_until_ready((x @ x).sum()))
    elif frontend == "torch_xla":
        import torch, torch_xla
        import torch_xla.core.xla_model as xm
        import torch_xla.runtime as xr
        out["version"] = getattr(torch_xla, "__version__", "?")
        device = torch_xla.device() if hasattr(torch_xla, "device") else xm.xla_device()
        out["platform"] = str(xr.device_type()).lower()
        out["device_kind"] = str(xm.xla_device_hw(device))
        out["device_count"] = xr.global_runtime_device_count()
        out["local_device_count"] = xr.addressable_runtime_device_count()
        x = torch.arange(16.0, dtype=torch.float32, device=device).reshape(4, 4)
        value = float((x @ x).sum().cpu())
    elif frontend == "torch_tpu":
        import torch, torch_tpu
        out["version"] = getattr(torch_tpu, "__version__", "?")
        backend = getattr(torch.backends, "tpu", None)
        if backend is not None and hasattr(backend, "is_available") and not backend.is_available():
            raise RuntimeError("torch.backends.tpu.is_available() is False")
        device = torch.device("tpu")
        x = torch.arange(16.0, dtype=torch.float32).reshape(4, 4).to(device)
        value = float((x @ x).sum().cpu())
        out["platform"] = "tpu"
        out["device_kind"] = "tpu"
        mod = getattr(torch, "tpu", None)
        out["device_count"] = mod.device_count() if mod is not None and hasattr(mod, "device_count") else None
    else:
        import torch
        out["version"] = torch.__version__
        x = torch.arange(16.0, dtype=torch.float32).reshape(4, 4)
        value = float((x @ x).sum())
        out["platform"] = "cpu"
        out["device_kind"] = "cpu"
        out["device_count"] = 1
    out["value"] = value
    out["expected"] = 3920.0
    out["computed"] = abs(value - 3920.0) < 1e-3
    code = 0
except BaseException as exc:
    traceback.print_exc()
    out["error"] = f"{type(exc).__name__}: {exc}".strip()
    code = 1
done(code)
"""


def child_environment(policy: dict, base: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """The child's environment: `base` minus forbidden variables, plus the policy env.

    Returns (env, forbidden variables that were set and got removed).
    """
    env = dict(base)
    removed = []
    for var in policy.get("forbid") or []:
        if var in env:
            removed.append(var)
            env.pop(var)
    env.update({str(k): str(v) for k, v in (policy.get("env") or {}).items()})
    # Logging only: the C++ runtime's INFO/WARNING lines carry the reasons.
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "0")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("PYTHONPATH", None)  # hostside's path must not shadow the bundle
    return env, removed


def run_child(argv: list[str], env: dict[str, str], timeout: float) -> tuple[int | None, str, str, bool]:
    """Run a child in its own process group; on timeout kill the whole group. (rc, out, err, timed_out)."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
        errors="replace",
        start_new_session=True,
    )

    def kill_group() -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass

    def on_termination(signum, _frame):
        # The child has a session of its own (so a timeout kills all of it); when the probe itself is
        # ended (the transport's `timeout`, a dropped connection) it must not live on holding libtpu.
        kill_group()
        raise SystemExit(128 + signum)

    previous = {}
    try:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            previous[sig] = signal.signal(sig, on_termination)
    except ValueError:  # not the main thread: the caller owns signal handling
        pass
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err, False
    except subprocess.TimeoutExpired:
        kill_group()
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            out, err = "", ""
        return None, out or "", err or "", True
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def read_libtpu_errors(log_dir: str, since: float) -> str:
    """libtpu's own ERROR log lines written since `since` (it logs to files, not stderr)."""
    lines = []
    for path in sorted(glob.glob(os.path.join(log_dir, "*.ERROR.*")) + glob.glob(os.path.join(log_dir, "*log.ERROR*"))):
        try:
            if os.path.getmtime(path) < since or os.path.islink(path):
                continue
            with open(path, errors="replace") as fh:
                lines += [ln.rstrip() for ln in fh if re.match(r"^[EF]\d{4} ", ln)]
        except OSError:
            continue
    return "\n".join(dict.fromkeys(lines))


def check_runtime(req: dict, state: dict, deadline: float) -> Check:
    c = Check("runtime")
    if not req.get("deep", True):
        c.status, c.summary = "skip", "shallow probe"
        return c
    if not req.get("lane"):
        c.status, c.summary = "skip", "worker is in no lane"
        return c
    python = state.get("python")
    if not python:
        c.status, c.summary = "skip", "no bundle environment to run"
        return c
    frontends = state.get("frontends") or []
    if not frontends:
        c.mark(
            "fail",
            f"bundle {state.get('bundle_id')} has no frontend to probe (jax, torch_xla, torch_tpu"
            f"{'' if req.get('platform') == 'tpu' else ', torch'})",
            layer="bundle-skew",
        )
        return c
    policy = req.get("policy") or {}
    env, removed = child_environment(policy, dict(os.environ))
    intended = req.get("platform")
    c.data["policy_env"] = redact.env({str(k): str(v) for k, v in (policy.get("env") or {}).items()})
    if removed:
        c.data["forbidden_removed"] = removed
        c.mark(
            "warn",
            f"forbidden by the runtime profile but set on the worker (removed for the probe): {', '.join(removed)}",
        )
    own_log_dir = None
    if "TPU_LOG_DIR" not in (policy.get("env") or {}):
        own_log_dir = tempfile.mkdtemp(prefix="orch-probe-tpu-logs-")
        env["TPU_LOG_DIR"] = own_log_dir
    log_dir = env["TPU_LOG_DIR"]
    per_frontend = float(req.get("runtime_timeout", 60))
    answers, results = [], []
    try:
        for frontend in frontends:
            remaining = deadline - time.monotonic()
            if remaining < 2:
                c.mark("fail", f"{frontend}: not probed, the probe's time budget ran out")
                continue
            limit = min(per_frontend, remaining - 1)
            started = time.time()
            t0 = time.monotonic()
            rc, out, err, timed_out = run_child([python, "-c", RUNTIME_CHILD, frontend, RESULT_MARK], env, limit)
            verdict = parse_runtime_output(
                frontend,
                out,
                err,
                rc,
                intended=intended,
                timed_out=limit if timed_out else None,
                extra_log=read_libtpu_errors(log_dir, started - 1),
            )
            verdict["elapsed"] = round(time.monotonic() - t0, 3)
            verdict["stderr_tail"] = "\n".join(err.rstrip().splitlines()[-40:])
            results.append(verdict)
            if verdict["status"] == "ok":
                answers.append(verdict["summary"])
            else:
                c.mark("fail", verdict["summary"], layer="runtime-proof")
                c.evidence.extend(f"{frontend}: {ln}" for ln in verdict["evidence"])
    finally:
        if own_log_dir:
            shutil.rmtree(own_log_dir, ignore_errors=True)
    c.data["frontends"] = [{k: v for k, v in r.items() if k != "evidence"} for r in results]
    first = next((r["result"] for r in results if r.get("result") and r["result"].get("platform")), None)
    if first:
        c.data["answered"] = {
            "platform": first.get("platform"),
            "device_kind": first.get("device_kind"),
            "device_count": first.get("device_count"),
        }
    c.summary = "; ".join([r["summary"] for r in results if r["status"] != "ok"] + answers) or c.summary
    return c


def check_cache(req: dict, state: dict) -> Check:
    c = Check("cache")
    caches = req.get("caches") or []
    if not caches:
        c.status, c.summary = "skip", "no cache policy for this lane"
        return c
    bundle_id = state.get("bundle_id")
    have = set(state.get("frontends") or []) | {f for f, d in FRONTEND_DISTS.items() if d in state.get("installed", {})}
    rows, parts = [], []
    for entry in caches:
        frontend = entry.get("frontend")
        if state.get("installed") is not None and frontend and frontend not in have:
            continue
        path = str(entry["path"])
        if "{bundle_id}" in path:
            if not bundle_id:
                c.mark("skip")
                continue
            path = path.replace("{bundle_id}", bundle_id)
        expect = entry.get("expect", "writable")
        row = {"frontend": frontend, "path": path, "expect": expect, "exists": os.path.isdir(path)}
        rows.append(row)
        label = f"{frontend or 'cache'} {path}"
        if not row["exists"]:
            if os.path.exists(path):
                c.mark("fail", f"{label} exists but is not a directory", layer="cache")
            elif expect == "writable":
                parent = _existing_parent(path)
                if os.access(parent, os.W_OK):
                    # Normal before the first run on a fresh bundle: the runtime creates it.
                    parts.append(f"{frontend or 'cache'} rw (created on first write under {parent})")
                else:
                    c.mark("fail", f"{label} does not exist and {parent} is not writable", layer="cache")
            else:
                c.mark("warn", f"{label} does not exist: the writer has not warmed it yet (cold start)")
            continue
        row["writable"] = os.access(path, os.W_OK | os.X_OK)
        row["readable"] = os.access(path, os.R_OK | os.X_OK)
        if expect == "writable" and not row["writable"]:
            c.mark("fail", f"{label} is not writable, but this worker writes the cache", layer="cache")
        elif expect == "readonly" and not row["readable"]:
            c.mark("fail", f"{label} is not readable", layer="cache")
        elif expect == "readonly" and row["writable"]:
            # A shared mount is usually writable for everyone; orch's launcher opens it read-only.
            parts.append(f"{frontend or 'cache'} ro ok (read-only enforced by the launcher; the mount is writable)")
        else:
            parts.append(f"{frontend or 'cache'} {'rw' if expect == 'writable' else 'ro'} ok")
    c.data["caches"] = rows
    c.summary = ", ".join(parts) or (c.evidence[0] if c.evidence else "no cache directory to check")
    return c


def _existing_parent(path: str) -> str:
    parent = os.path.dirname(path.rstrip("/")) or "/"
    while not os.path.exists(parent) and parent != "/":
        parent = os.path.dirname(parent) or "/"
    return parent


# ---------------------------------------------------------------------------


def probe(req: dict) -> dict:
    """Run every check for one request; the document this job prints."""
    start = time.monotonic()
    deadline = start + float(req.get("deadline", 120))
    state: dict = {}
    checks = []
    for name, fn in (
        ("host", lambda: check_host(req)),
        ("bundle", lambda: check_bundle(req, state)),
        ("device", lambda: check_device(req, state)),
        ("runtime", lambda: check_runtime(req, state, deadline)),
        ("cache", lambda: check_cache(req, state)),
    ):
        try:
            checks.append(fn().to_dict())
        except Exception as exc:  # a broken check is reported, the others still run
            checks.append(
                {
                    "name": name,
                    "status": "fail",
                    "summary": f"check crashed: {type(exc).__name__}: {exc}",
                    "evidence": [f"{type(exc).__name__}: {exc}"],
                    "elapsed": 0.0,
                    "data": {},
                    "layer": "other",
                }
            )
    return {
        "schema_version": SCHEMA_VERSION,
        "job": "probe",
        "lane": req.get("lane"),
        "platform": req.get("platform"),
        "bundle_id": state.get("bundle_id"),
        "status": worst(c["status"] for c in checks),
        "checks": checks,
        "elapsed": round(time.monotonic() - start, 3),
    }


def main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["--request"] and len(argv) > 1:
            req = json.loads(argv[1])
        elif argv and argv[0] != "-":
            with open(argv[0]) as fh:
                req = json.load(fh)
        else:
            req = json.load(sys.stdin)
    except (OSError, ValueError) as exc:
        print(f"probe: cannot read the request: {exc}", file=sys.stderr)
        return 2
    if not isinstance(req, dict) or "root" not in req:
        print("probe: the request must be a JSON object with at least 'root'", file=sys.stderr)
        return 2
    print(json.dumps(probe(req)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

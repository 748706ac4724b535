"""The probe's runtime check: run each frontend in a child of the bundle's Python and judge its answer.

The child is `hostside.probe_runtime`, started in its own process group with
the lane's policy applied to its environment; a timeout kills the whole
group, and so does the end of the probe itself (it must not leave a child
holding libtpu). Its answer is judged by `parse_runtime_output` (pure, tested
from captured logs): a frontend that answered from another platform than
the intended one is a silent fallback, a failure.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from types import FrameType
from typing import Any

from hostside import probe_runtime, redact
from hostside.probe_check import Check

RESULT_MARK = "ORCH-PROBE-RESULT "
# Log lines worth showing as evidence out of a frontend's stderr.
KEY_LINE = re.compile(
    r"Unable to initialize backend|TPU initialization failed|jellyfish|lockfile|already in use|"
    r"Failed to get (global )?TPU topology|[Ff]alling back|libtpu|PJRT|Error\b|error:|"
    r"ABORTED|NOT_FOUND|INTERNAL|UNAVAILABLE|DEADLINE_EXCEEDED|RESOURCE_EXHAUSTED|UNIMPLEMENTED|"
    r"out of memory|Killed|^[EF]\d{4} "
)
NOISE_LINE = re.compile(r"^I\d{4} |argv\[\d+\]")


def runtime_source() -> str:
    """The child program's source (hostside/probe_runtime.py), handed to the bundle's Python with `-c`."""
    with open(probe_runtime.__file__, encoding="utf-8") as fh:
        return fh.read()


def key_lines(text: str, limit: int = 12) -> list[str]:
    """The lines of a runtime's log that explain what happened, in order, without duplicates."""
    seen: set[str] = set()
    out: list[str] = []
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
) -> dict[str, Any]:
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


def child_environment(policy: dict[str, Any], base: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """The child's environment: `base` minus forbidden variables, plus the policy env.

    Returns (env, forbidden variables that were set and got removed).
    """
    env = dict(base)
    removed = []
    for var in policy.get("forbid") or []:
        if var in env:
            removed.append(var)
            env.pop(var)
    for var in policy.get("unset") or []:  # inherited topology (stale MEGASCALE_*): gone, not reported
        env.pop(var, None)
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

    def on_termination(signum: int, _frame: FrameType | None) -> None:
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


def check_runtime(req: dict[str, Any], state: dict[str, Any], deadline: float) -> Check:
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
            rc, out, err, timed_out = run_child([python, "-c", runtime_source(), frontend, RESULT_MARK], env, limit)
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

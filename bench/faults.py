"""Fault matrix: lane invariants under concurrency and faults, on a local slice with small real bundles.

Each case is scripted with orch's own command line, then checked on every
worker: the lane's active bundle is one and the same, no orch process is left,
no temporary file is left, and the failure names its worker and layer.

  race-same        two `orch deploy` of one bundle started together
  race-different   two `orch deploy` of different bundles started together
  deploy-rollback  `orch deploy` and `orch rollback` started together
  kill-relay       SIGKILL of the controller while the seed's wheel relay serves
  kill-install     SIGKILL of the controller while uv installs on a worker
  damaged-lock     a lock file holding `null`, `[]` or a non-numeric heartbeat
  kill-sshd        SIGKILL of the last worker's sshd alone while it installs
  pause-probe      the last worker paused during `orch probe`
  pause-released   the last worker paused after the release of an attached run, resumed
                   once the controller has ended the gang

Prints one line per case: trials, outcome, and times (for the kill cases, the
seconds from the SIGKILL until no orch process runs on any worker; for
pause-probe, the probe's; for pause-released, from the resume until nothing of
the run is left).

    .venv/bin/python bench/faults.py [--workers 4] [--trials 20] [--kills 3] [--only CASES]
                                     [--sandbox-dir DIR] [--smoke]

--smoke: 2 workers, 1 trial of each case.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _slice import LANE, Slice, add_slice_args, open_slice, orch_executable  # noqa: E402

from orchestrator import sandbox  # noqa: E402
from orchestrator.sandbox import lifecycle, namespaces  # noqa: E402

BUNDLES = {
    "small-a": {"python": "3.11", "pins": ["opt_einsum==3.4.0"]},
    "small-b": {"python": "3.11", "pins": ["ml_dtypes==0.5.4"]},
    "small-c": {"python": "3.11", "pins": ["ml_dtypes==0.5.4", "six==1.17.0"]},
}
ORCH_PROCESSES = re.compile(r"hostside\.|uv venv|uv pip|sleep\.py")
BOUND = 30.0  # docs/reliability.md: every orch helper ends within this after its controller stops renewing
ROOT = "/var/lib/orch"


class Faults:
    def __init__(self, sl: Slice):
        self.sl = sl
        self.state = lifecycle.load_state(sl.dir)
        base = yaml.safe_load(sl.fleet_path.read_text())
        base["bundles"].update(BUNDLES)
        self.fleets = {}
        for name in BUNDLES:
            doc = dict(base, lanes={LANE: dict(base["lanes"][LANE], bundle=name)})
            path = sl.dir / f"faults-fleet-{name}.yaml"
            path.write_text(yaml.safe_dump(doc, sort_keys=False))
            self.fleets[name] = path
        self.ids = {
            name: sl.orch_json("bundle", "lock", name, "--json", fleet=path, timeout=900)
            for name, path in self.fleets.items()
        }
        self.ids = {n: json.loads(Path(d["lock"]).read_text())["bundle_id"] for n, d in self.ids.items()}

    # -- plumbing ---------------------------------------------------------------

    def spawn(self, bundle: str, *args: str) -> subprocess.Popen[str]:
        argv = [orch_executable(), "--fleet", str(self.fleets[bundle]), *args]
        return subprocess.Popen(argv, env=self.sl.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def ssh(self, i: int, command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.sl.ssh_argv(self.sl.addresses[i]), command], capture_output=True, text=True, timeout=120
        )

    def deploy(self, bundle: str) -> dict[str, Any]:
        return self.sl.orch_json("deploy", "--lane", LANE, "--json", fleet=self.fleets[bundle], timeout=900)

    def active(self) -> list[str]:
        return [
            self.ssh(i, f"readlink {ROOT}/lanes/{LANE}/active").stdout.strip().rsplit("/", 1)[-1]
            for i in range(self.sl.workers)
        ]

    def orch_processes(self) -> list[str]:
        procs = namespaces.processes()
        found = []
        for ws in self.state.workers:
            for pid in namespaces.worker_processes(ws, procs):
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                if ORCH_PROCESSES.search(argv):
                    found.append(f"{ws.name}: {pid} {argv.strip()}")
        return found

    def leftovers(self) -> list[str]:
        pattern = f"{ROOT}/envs/.*.build-* {ROOT}/envs/.*.links-* {ROOT}/serve/*.pid {ROOT}/lanes/{LANE}/deploy.lock"
        return [
            out for i in range(self.sl.workers) if (out := self.ssh(i, f"ls -d {pattern} 2>/dev/null").stdout.strip())
        ]

    def after(self) -> list[str]:
        """What is wrong on the workers now (empty: every after-state check holds)."""
        problems = []
        active = self.active()
        if len(set(active)) != 1:
            problems.append(f"lane mixed: {active}")
        problems += [f"process left: {p}" for p in self.orch_processes()]
        problems += [f"file left: {f}" for f in self.leftovers()]
        return problems

    def forget(self, bundle: str) -> None:
        for i in range(self.sl.workers):
            self.ssh(i, f"rm -rf {ROOT}/envs/{self.ids[bundle]} {ROOT}/store")

    # -- cases ------------------------------------------------------------------

    def race(self, first: list[str], second: list[str], bundles: tuple[str, str]) -> tuple[bool, str, float]:
        t0 = time.monotonic()
        procs = [self.spawn(bundles[0], *first), self.spawn(bundles[1], *second)]
        results = [(p, *p.communicate(timeout=900)) for p in procs]
        took = time.monotonic() - t0
        losers = [(p, out, err) for p, out, err in results if p.returncode != 0]
        winners = [p for p, _, _ in results if p.returncode == 0]
        problems = self.after()
        if len(losers) == 2:
            problems.append("both failed")
        for _, out, err in losers:
            if not winners or f"pid {winners[0].pid} " not in out + err:
                problems.append(f"the loser does not name the holder: {(out + err)[-300:]}")
        return not problems, "; ".join(problems) or ("one refused, naming the holder" if losers else "serialised"), took

    def kill(self, moment: str) -> tuple[bool, str, float]:
        self.deploy("small-a")
        self.forget("small-b")
        proc = self.spawn("small-b", "deploy", "--lane", LANE)
        helper = {"relay": "hostside.deploy serve", "install": "hostside.deploy install"}[moment]
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            if any(helper in p for p in self.orch_processes()):
                break
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        if not any(helper in p for p in self.orch_processes()):
            return False, f"{helper} had ended before the controller was killed", 0.0
        killed = time.monotonic()
        while self.orch_processes() and time.monotonic() - killed < 120:
            time.sleep(0.2)
        gone = time.monotonic() - killed
        problems = [] if gone <= BOUND else [f"processes outlived the bound: {gone:.1f}s"]
        active = self.active()
        if set(active) != {self.ids["small-a"]}:
            problems.append(f"the old bundle is not active everywhere: {active}")
        rerun = self.deploy("small-b")  # a rerun from this host finds the dead deploy's lock dead at once
        if not rerun["ok"]:
            problems.append(f"rerun failed: {rerun}")
        problems += self.after()
        return not problems, "; ".join(problems) or "all gone, old bundle kept, rerun recovers the lock", gone

    def damaged_lock(self, content: str) -> tuple[bool, str, float]:
        self.deploy("small-a")
        lock = f"{ROOT}/lanes/{LANE}/deploy.lock"
        self.ssh(0, f"printf %s {shlex.quote(content)} > {lock} && touch -d '1 hour ago' {lock}")
        t0 = time.monotonic()
        doc = self.sl.orch_json(
            "deploy", "--lane", LANE, "--json", fleet=self.fleets["small-b"], check=False, timeout=900
        )
        took = time.monotonic() - t0
        w0 = next(iter(doc["workers"].values()))
        problems = [] if doc["ok"] and (w0.get("recovered_lock") or {}).get("reason") else [f"not recovered: {w0}"]
        problems += self.after()
        return not problems, "; ".join(problems) or f"recovered as stale ({w0['recovered_lock']['reason']})", took


class WorkerFaults(Faults):
    """Faults of one worker (the last): its sshd killed, the worker paused."""

    @property
    def last(self) -> int:
        return self.sl.workers - 1

    def name(self, i: int) -> str:
        return self.state.workers[i].name

    def wait_gone(self, limit: float) -> float:
        """Seconds until no orch process runs on any worker (polled; gives up after `limit`)."""
        t0 = time.monotonic()
        while self.orch_processes() and time.monotonic() - t0 < limit:
            time.sleep(0.2)
        return time.monotonic() - t0

    def kill_sshd(self) -> tuple[bool, str, float]:
        self.deploy("small-a")
        self.forget("small-b")
        proc = self.spawn("small-b", "deploy", "--lane", LANE, "--json")
        w = self.name(self.last)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            if any(p.startswith(f"{w}:") and "hostside.deploy install" in p for p in self.orch_processes()):
                break
            time.sleep(0.01)
        sandbox.kill_sshd(self.sl.dir, self.last)
        killed = time.monotonic()
        out, _ = proc.communicate(timeout=600)
        self.wait_gone(120)
        gone = time.monotonic() - killed
        problems = [] if gone <= BOUND else [f"processes outlived the bound: {gone:.1f}s"]
        reason = json.loads(out)["workers"][w].get("reason") or ""
        if f"the connection to {w} was lost during" not in reason:
            problems.append(f"{w}'s failure does not say the connection was lost: {reason!r}")
        self.state = lifecycle.up(self.sl.dir, self.sl.workers, base_address=self.sl.addresses[0])
        rerun = self.deploy("small-b")
        if not rerun["ok"]:
            problems.append(f"rerun failed: {rerun}")
        problems += self.after()
        return not problems, "; ".join(problems) or "named the lost connection, helper gone, rerun completes", gone

    def pause_probe(self) -> tuple[bool, str, float]:
        w = self.name(self.last)
        fleet = self.fleets[next(n for n, i in self.ids.items() if i == self.active()[0])]  # the active bundle's
        sandbox.pause(self.sl.dir, self.last)
        t0 = time.monotonic()
        try:
            argv = ("probe", "--shallow", "--timeout", "15", "--json")
            doc = self.sl.orch_json(*argv, fleet=fleet, check=False, timeout=300)
        finally:
            took = time.monotonic() - t0
            sandbox.resume(self.sl.dir, self.last)
        rows = {r["worker"]: r for r in doc["rows"]}
        problems = []
        if rows[w]["layer"] != "transport":
            problems.append(f"{w} is not a transport failure: {rows[w]['evidence']}")
        problems += [f"{n} failed too: {r['evidence']}" for n, r in rows.items() if n != w and r["verdict"] == "fail"]
        if self.wait_gone(BOUND) > BOUND:
            problems.append("a probe outlived the bound after the resume")
        problems += self.after()
        said = (rows[w].get("error") or "")[:80]
        return not problems, "; ".join(problems) or f"{w} a transport row ({said}), the others judged", took

    def pause_released(self, code: Path) -> tuple[bool, str, float]:
        w = self.name(self.last)
        active = next(n for n, i in self.ids.items() if i == self.active()[0])
        argv = [orch_executable(), "--fleet", str(self.fleets[active]), "launch", "--lane", LANE]
        argv += ["--workdir", str(code), "--lost-after", "10", "--", "sleep.py"]
        env = {**self.sl.env, "ORCH_RUNS_DIR": str(self.sl.dir / "faults-runs")}
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        sleeping = 0
        for line in proc.stdout:  # type: ignore[union-attr]
            sleeping += "sleeping" in line
            if sleeping == self.sl.workers:
                break
        sandbox.pause(self.sl.dir, self.last)
        try:
            out, _ = proc.communicate(timeout=300)
        finally:
            sandbox.resume(self.sl.dir, self.last)
        resumed = time.monotonic()
        gone = self.wait_gone(120)
        problems = [] if gone <= BOUND else [f"the resumed worker's run outlived the bound: {gone:.1f}s"]
        if w not in out or proc.returncode == 0:
            problems.append(f"the outcome does not name {w}: {out[-300:]}")
        problems += self.after()
        took = time.monotonic() - resumed
        found = re.search(r"orch: run (\S+?):? ", out)
        ended = self.ssh(self.last, f"cat {ROOT}/runs/{found.group(1)}/exit.json") if found else None
        why = json.loads(ended.stdout).get("reason", "?") if ended and ended.returncode == 0 else "no exit.json"
        note = f"gang ended naming {w}; after the resume its run ended: {why.split(';')[0][:60]}"
        return not problems, "; ".join(problems) or note, took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_slice_args(ap, workers=4)
    ap.add_argument("--trials", type=int, default=20, help="Trials of each race (default 20).")
    ap.add_argument("--kills", type=int, default=3, help="Trials of each kill and pause case (default 3).")
    ap.add_argument("--only", metavar="CASES", help="Only these cases (comma-separated names, prefixes match).")
    args = ap.parse_args()
    if args.smoke:
        args.workers, args.trials, args.kills = 2, 1, 1
    rows: list[tuple[str, int, int, str, list[float]]] = []

    only = [c.strip() for c in (args.only or "").split(",") if c.strip()]

    def run(case: str, n: int, fn: Any) -> None:
        if only and not any(case.startswith(c) for c in only):
            return
        ok, notes, times = 0, Counter[str](), []
        for _ in range(n):
            good, note, took = fn()
            ok += good
            times.append(took)
            notes[note] += 1
        said = "; ".join(f"{note} x{count}" for note, count in notes.most_common())
        rows.append((case, n, ok, said, times))
        med, top = statistics.median(times), max(times)
        print(f"{case:22} {ok}/{n} passed  median {med:.1f}s max {top:.1f}s  {said[:400]}", flush=True)

    with open_slice("faults", args.workers, sandbox_dir=args.sandbox_dir, base_address=args.base_address) as sl:
        f = WorkerFaults(sl)
        f.deploy("small-a")
        deploy = ["deploy", "--lane", LANE, "--json"]
        flip = iter(range(10**6))

        def same() -> tuple[bool, str, float]:
            target = "small-b" if f.active()[0] != f.ids["small-b"] else "small-c"
            return f.race(deploy, deploy, (target, target))

        def different() -> tuple[bool, str, float]:
            pair = ("small-b", "small-c") if next(flip) % 2 == 0 else ("small-c", "small-b")
            return f.race(deploy, deploy, pair)

        def deploy_rollback() -> tuple[bool, str, float]:
            target = "small-b" if f.active()[0] != f.ids["small-b"] else "small-c"
            return f.race(deploy, ["rollback", "--lane", LANE, "--json"], (target, target))

        run("race-same", args.trials, same)
        run("race-different", args.trials, different)
        run("deploy-rollback", args.trials, deploy_rollback)
        run("kill-relay", args.kills, lambda: f.kill("relay"))
        run("kill-install", args.kills, lambda: f.kill("install"))
        for content in ("null", "[]", '{"token": "t", "heartbeat": "soon"}'):
            run(f"damaged-lock {content[:12]}", 1, lambda c=content: f.damaged_lock(c))
        run("kill-sshd", args.kills, f.kill_sshd)
        run("pause-probe", args.kills, f.pause_probe)
        code = sl.dir / "faults-code"
        code.mkdir(exist_ok=True)
        (code / "sleep.py").write_text("import time\nprint('sleeping', flush=True)\ntime.sleep(900)\n")
        run("pause-released", args.kills, lambda: f.pause_released(code))
    failed = [r for r in rows if r[2] != r[1]]
    print(f"cases {len(rows)}, trials {sum(r[1] for r in rows)}, failed cases {len(failed)}")
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()

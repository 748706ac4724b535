"""hostside jobs run isolated on a real worker: modules planted in the SSH user's home (the
working directory of every SSH command) change nothing, neither the install step nor a job."""

from __future__ import annotations

import pytest

from orchestrator.remote import job_document, run_hostside
from orchestrator.transport import for_fleet

pytestmark = pytest.mark.ssh

PLANTED = 'raise SystemExit("planted module from the home directory was imported")\n'


def test_a_planted_json_py_or_hostside_package_in_the_home_directory_changes_nothing(make_sandbox):
    small = make_sandbox(1)
    [name] = small.workers
    home = small.dir / "workers" / name / "home"
    for module in ("json.py", "tarfile.py", "tempfile.py"):
        (home / module).write_text(PLANTED)
    (home / "hostside").mkdir()
    (home / "hostside" / "__init__.py").write_text(PLANTED)
    (home / "hostside" / "facts.py").write_text('print(\'{"schema_version": 1, "hostname": "spoofed"}\')\n')
    fleet = small.fleet
    with for_fleet(fleet, fleet.workers) as t:
        [worker] = fleet.workers
        res = run_hostside(t, worker, "facts", [worker.root])  # ships hostside first: the install step too
    assert res.ok, res.describe()
    doc = job_document(res)
    assert doc["hostname"] == name
    assert small.ssh(name, "pwd").stdout.strip() == "/root"  # the planted files were on the job's cwd

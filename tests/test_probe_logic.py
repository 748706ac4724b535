"""The probe sweep's decisions, against a scripted transport (the slice tests prove the capabilities)."""

from __future__ import annotations

import json

from fakes import Call, answers, exits, timed_out, unreachable, worker

from orchestrator import probe
from orchestrator.remote import ensure_hostside, hostside_path


def probe_plan(workers: int, timeout: float = 30.0) -> probe.ProbePlan:
    requests = tuple(
        probe.ProbeRequest(worker=worker(i, lane=None), lane=None, doc={"schema_version": 1, "root": "/var/lib/orch"})
        for i in range(workers)
    )
    return probe.ProbePlan(requests=requests, deep=False, timeout=timeout)


HEALTHY = {"job": "probe", "checks": [{"name": "host", "status": "ok", "summary": "python 3.11"}]}


def test_a_worker_that_does_not_answer_is_a_transport_row_and_the_others_are_judged(scripted_transport):
    fake = scripted_transport([worker(i, lane=None) for i in range(3)])
    fake.expect_job("w0", "probe", answer=HEALTHY)
    fake.expect_job("w1", "probe", reply=timed_out())
    fake.expect_job("w2", "probe", answer=HEALTHY)

    report = probe.sweep(probe_plan(3), fake)

    assert [(r.worker, r.verdict, r.layer) for r in report.rows] == [
        ("w0", "ok", None),
        ("w1", "fail", "transport"),
        ("w2", "ok", None),
    ]
    assert report.rows[1].error == "timed out after 30s"
    assert report.summary()["layers"] == {"transport": ["w1"]}


def test_an_unreachable_worker_is_a_transport_row_with_the_reason_as_evidence(scripted_transport):
    fake = scripted_transport([worker(0, lane=None)])
    fake.expect_job("w0", "probe", reply=unreachable("connection to 10.0.0.0:22 refused (sshd not running?)"))

    [row] = probe.sweep(probe_plan(1), fake).rows

    assert (row.verdict, row.layer) == ("fail", "transport")
    assert row.evidence == "connection to 10.0.0.0:22 refused (sshd not running?)"


def test_a_worker_that_answers_without_a_document_is_not_blamed_on_the_transport(scripted_transport):
    fake = scripted_transport([worker(0, lane=None)])
    fake.expect_job("w0", "probe", reply=exits(127, stderr="sh: 1: python3: not found\n"))

    [row] = probe.sweep(probe_plan(1), fake).rows

    assert row.verdict == "fail" and row.layer != "transport"
    assert "python3: not found" in row.evidence


def test_the_request_travels_as_one_argument_with_the_plan_timeout_and_no_controller_clock(scripted_transport):
    def sent(call: Call) -> None:
        i = call.argv.index("--request")
        doc = json.loads(call.argv[i + 1])
        # the clock is judged on the controller, over the round trip (its `clock` finding)
        assert doc["root"] == "/var/lib/orch" and "controller_time" not in doc
        assert call.timeout == 12.0 and call.stdin is None

    fake = scripted_transport([worker(0, lane=None)])
    fake.expect_job("w0", "probe", answer=HEALTHY, check=sent)

    probe.sweep(probe_plan(1, timeout=12.0), fake)


def test_hostside_is_shipped_once_to_a_worker_that_lacks_it_then_only_used(scripted_transport):
    w = worker(0, lane=None)
    final = hostside_path(w)
    fake = scripted_transport([w], hostside_ready=False)
    fake.expect_run("w0", ["test", "-f", f"{final}/.complete"], reply=exits(1))
    fake.expect_run("w0", ["mkdir", "-p", "/var/lib/orch/hostside"])
    fake.expect_put("w0", "/var/lib/orch/hostside/.upload-")
    fake.expect_run("w0", ["python3", "-I", "-c"])  # isolated: nothing in the SSH user's home is imported
    fake.expect_job("w0", "probe", answer=HEALTHY)
    fake.expect_job("w0", "probe", answer=HEALTHY)  # the second sweep on the same transport: no check again

    first = probe.sweep(probe_plan(1), fake)
    second = probe.sweep(probe_plan(1), fake)

    assert first.rows[0].verdict == second.rows[0].verdict == "ok"
    [install] = [c for c in fake.calls_to("w0") if c.argv[:3] == ("python3", "-I", "-c")]
    assert install.argv[-1] == final
    jobs = [c for c in fake.calls_to("w0") if "hostside.probe" in c.argv]
    # isolated, with exactly the shipped hostside first on sys.path
    assert all(c.argv[:3] == ("python3", "-I", "-B") and c.argv[5] == final for c in jobs)


def test_a_worker_where_shipping_hostside_fails_is_reported_with_that_failure(scripted_transport):
    w = worker(0, lane=None)
    fake = scripted_transport([w], hostside_ready=False)
    fake.expect_run("w0", ["test", "-f"], reply=exits(1))
    fake.expect_run(
        "w0", ["mkdir", "-p"], reply=exits(1, stderr="mkdir: cannot create directory: Read-only file system")
    )

    [row] = probe.sweep(probe_plan(1), fake).rows

    assert row.verdict == "fail"
    assert "Read-only file system" in row.evidence


def test_answers_carry_a_schema_version():
    # the fake's replies look like a hostside job's: one JSON document with schema_version
    call = Call("w0", "run", ("python3", "-m", "hostside.probe"))
    assert json.loads(answers({"ok": True})(call).stdout) == {"schema_version": 1, "ok": True}


def test_a_full_disk_while_shipping_hostside_is_reported_as_disk_with_free_and_needed_figures(scripted_transport):
    from orchestrator.remote import hostside_bytes_needed

    w = worker(0, lane=None)
    fake = scripted_transport([w], hostside_ready=False)
    fake.expect_run("w0", ["test", "-f"], reply=exits(1))
    fake.expect_run("w0", ["mkdir", "-p"])
    refused = "SFTP put to w0:/x failed on the worker: Failure (the SFTP server gives no detail; usually a full disk)"
    fake.expect_put("w0", "/var/lib/orch/hostside/.upload-", reply=unreachable(refused, kind="remote"))
    fake.expect_run("w0", ["rm", "-f"])  # what part of it arrived
    fake.expect_run("w0", ["python3", "-I", "-c"], reply=exits(0, stdout="4096\n"))  # bytes free

    res = ensure_hostside(fake, w)

    assert res.error_kind == "disk"
    assert res.error.startswith("disk: no room to ship orch's helper code to /var/lib/orch/hostside: 4 KiB free, ")
    assert f"{hostside_bytes_needed() / 2**20:.1f} MiB needed" in res.error or "KiB needed" in res.error


def test_a_connection_lost_while_shipping_hostside_stays_a_transport_failure(scripted_transport):
    w = worker(0, lane=None)
    fake = scripted_transport([w], hostside_ready=False)
    fake.expect_run("w0", ["test", "-f"], reply=exits(1))
    fake.expect_run("w0", ["mkdir", "-p"])
    fake.expect_put("w0", "/var/lib/orch/hostside/.upload-", reply=unreachable())
    fake.expect_run("w0", ["rm", "-f"], reply=unreachable())

    res = ensure_hostside(fake, w)

    assert res.error_kind == "connect" and "ConnectionResetError" in res.error


def test_the_clock_offset_is_bounded_by_the_round_trip_and_only_a_sure_excess_warns():
    reading = probe.ClockReading.measure(sent=100.0, worker_time=103.1, arrived=100.2)
    assert (round(reading.offset, 6), round(reading.uncertainty, 6)) == (3.0, 0.1)
    assert probe.clock_check(reading).status == "warn"
    # 2.05 s ± 0.1 s might be 1.95 s: within the 2 s limit, so no warning
    unsure = probe.ClockReading.measure(sent=100.0, worker_time=102.15, arrived=100.2)
    check = probe.clock_check(unsure)
    assert check.status == "ok" and check.summary.startswith("clock +2.050s ± 0.100s from the controller's")


def test_the_probe_reports_each_workers_clock_offset_as_a_finding_of_its_own(scripted_transport):
    import time as _time

    def stamped(ahead: float):
        def reply(call: Call):
            doc = json.dumps({"schema_version": 1, **HEALTHY})
            return exits(0, stdout=doc + "\n", stderr=f"@orch-clock {_time.time() + ahead!r}\n")(call)

        return reply

    fake = scripted_transport([worker(0, lane=None), worker(1, lane=None)])
    fake.expect_job("w0", "probe", reply=stamped(0.0))
    fake.expect_job("w1", "probe", reply=stamped(3600.0))  # an hour ahead

    report = probe.sweep(probe_plan(2), fake)

    w0, w1 = report.rows
    assert w0.verdict == "ok" and w0.check("clock").status == "ok"
    assert abs(w0.check("clock").data["offset"]) < 5
    assert w1.verdict == "warn" and w1.evidence.startswith("clock: clock differs from the controller's by +3")
    clock = report.summary()["clock"]
    assert clock["workers"] == 2 and 3590 < clock["spread"] < 3610

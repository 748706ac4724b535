"""When a bundle's environment on a worker counts as installed (hostside.deploy_store.env_problem),
what begin, install, activate and status make of one that is not, and that the lease watcher's
cleanup never runs beside the rename of a finished environment into place."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fake_env import complete_env

from hostside import deploy as hd
from hostside.deploy_store import COMPLETE, MANIFEST, env_problem

OURS = {"token": "0a0a", "user": "me", "controller": "here", "pid": 1, "bundle_id": "new"}


def request(root: Path, **extra) -> dict:
    return {"root": str(root), "lane": "cpu", "bundle_id": "new", "bundle": "b", "holder": OURS, "wheels": []} | extra


def site(env: Path) -> Path:
    return env / "lib" / "python3.11" / "site-packages"


def activate_link(root: Path, bundle_id: str) -> None:
    (root / "lanes" / "cpu").mkdir(parents=True, exist_ok=True)
    (root / "lanes" / "cpu" / "active").symlink_to(f"../../envs/{bundle_id}")


def test_a_finished_environment_is_complete_and_compiled_files_are_optional(tmp_path):
    env = complete_env(tmp_path, "new")
    assert env_problem(str(env), "new") is None  # its RECORD lists a .pyc that was never written


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda env: (env / COMPLETE).unlink(), "no completion marker"),
        (lambda env: (env / MANIFEST).write_text("{"), "unreadable"),
        (lambda env: (env / MANIFEST).write_text('{"bundle_id": "new"}'), "lists no distributions"),
        (lambda env: (env / "bin" / "python").unlink(), "bin/python is missing"),
        (lambda env: shutil.rmtree(site(env) / "six-1.17.0.dist-info"), "six 1.17.0 is missing"),
        (lambda env: (site(env) / "six.py").unlink(), "lacks six.py"),
        (lambda env: (site(env) / "six-1.17.0.dist-info" / "RECORD").unlink(), "has no RECORD"),
        (lambda env: (site(env) / "six-1.17.0.dist-info" / "METADATA").unlink(), "has no METADATA"),
    ],
)
def test_an_environment_missing_any_part_is_incomplete_and_says_what(tmp_path, damage, said):
    env = complete_env(tmp_path, "new")
    damage(env)
    assert said in (env_problem(str(env), "new") or "")


def test_a_bin_python_whose_interpreter_is_gone_is_incomplete(tmp_path):
    env = complete_env(tmp_path, "new")
    (env / "bin" / "python").unlink()
    (env / "bin" / "python").symlink_to(tmp_path / "interpreters" / "gone" / "python3")
    assert "does not resolve to an executable" in (env_problem(str(env), "new") or "")


def test_a_manifest_of_another_bundle_is_incomplete_and_an_absent_env_is_not_installed(tmp_path):
    env = complete_env(tmp_path, "other")
    os.rename(env, tmp_path / "envs" / "new")
    assert "names bundle id other" in (env_problem(str(tmp_path / "envs" / "new"), "new") or "")
    assert env_problem(str(tmp_path / "envs" / "absent"), "absent") == "not installed"


def test_begin_says_unchanged_only_for_an_intact_active_environment(tmp_path):
    env = complete_env(tmp_path, "new")
    activate_link(tmp_path, "new")
    assert hd.begin(request(tmp_path))["state"] == "unchanged"
    hd.unlock(request(tmp_path))
    (env / "bin" / "python").unlink()  # the marker is still there
    doc = hd.begin(request(tmp_path))
    assert doc["state"] == "locked-by-us" and not doc["env_complete"]
    assert doc["env_problem"] == "bin/python is missing"


def test_install_takes_an_intact_environment_as_installed_without_building(tmp_path):
    complete_env(tmp_path, "new")
    hd.begin(request(tmp_path))
    doc = hd.install(request(tmp_path, uv={"sha256": "0" * 64, "filename": "uv.whl"}))
    assert doc["installed"] is False


def test_activate_and_status_refuse_an_incomplete_environment(tmp_path):
    env = complete_env(tmp_path, "new")
    (site(env) / "six.py").unlink()
    assert hd.begin(request(tmp_path))["env_problem"] == "distribution six lacks six.py (listed in its RECORD)"
    with pytest.raises(hd.DeployFailure, match="not complete"):
        hd.activate(request(tmp_path))
    activate_link(tmp_path, "new")
    assert hd.status({"root": str(tmp_path), "lanes": ["cpu"]})["lanes"]["cpu"]["complete"] is False


# The watcher's `abandon` runs on its own thread; what it cleans up must not be renamed into place meanwhile.
RACE = textwrap.dedent(
    """
    import os, shutil, sys, threading
    from hostside import deploy_lock as dl
    from hostside.layout import Layout
    root = sys.argv[1]
    build, env = os.path.join(root, "envs", ".new.build-t"), os.path.join(root, "envs", "new")
    os.makedirs(os.path.join(build, "bin"))
    open(os.path.join(build, "bin", "python"), "w").close()
    cleaned = threading.Event()
    def clean():
        with open(os.path.join(root, "cleanup-saw"), "w") as fh:
            fh.write("env in place" if os.path.exists(env) else "env not in place")
        cleaned.set()
        shutil.rmtree(build, ignore_errors=True)
    dl._cleanups.append(clean)
    inside = threading.Event()
    def install():
        with dl.committing():
            inside.set()
            dl._abandoning.wait()  # the lease ends while the environment is being put in place
            cleaned.wait(timeout=2)  # a bound: with the guard the cleanup cannot run now
            os.rename(build, env)
    threading.Thread(target=install, daemon=True).start()
    inside.wait()
    dl.abandon(Layout(root), {"lane": "cpu", "bundle_id": "new"}, "install", "not renewed")
    """
)


def test_a_lease_lost_while_the_environment_is_renamed_into_place_never_deletes_inside_it(tmp_path):
    proc = subprocess.run([sys.executable, "-c", RACE, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert (tmp_path / "cleanup-saw").read_text() == "env in place"  # the rename finished before the cleanup
    assert (tmp_path / "envs" / "new" / "bin" / "python").exists()
    assert not (tmp_path / "envs" / ".new.build-t").exists()


def test_once_abandoning_no_environment_is_put_in_place(tmp_path):
    script = textwrap.dedent(
        """
        import os, sys, threading
        from hostside import deploy_lock as dl
        root = sys.argv[1]
        dl._abandoning.set()
        def install():
            with dl.committing():
                os.makedirs(os.path.join(root, "envs", "new"))
        t = threading.Thread(target=install, daemon=True)
        t.start()
        t.join(timeout=2)  # a bound, not synchronisation: the body must never run
        sys.exit(0 if t.is_alive() else 1)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "envs" / "new").exists()

"""A hostile or broken fleet.yaml is refused quickly with `path/to/fleet.yaml:LINE yaml.path: message`,
never a traceback, a hang or an unbounded allocation."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.fleet import build_fleet, load_fleet, select_workers
from tests.test_fleet import GOOD, edit

BILLION_LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{b}: &{b} [{','.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi", strict=True)
)


def refusal(tmp_path: Path, content: str | bytes) -> str:
    """The error loading `content` as <tmp>/conf/fleet.yaml gives (it must be a ConfigError)."""
    path = tmp_path / "conf" / "fleet.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    with pytest.raises(ConfigError) as info:
        load_fleet(path)
    return str(info.value)


def test_a_billion_laughs_fleet_is_refused_in_under_a_second_naming_file_and_line(tmp_path):
    start = time.process_time()
    message = refusal(tmp_path, BILLION_LAUGHS)
    assert time.process_time() - start < 1.0
    assert message.startswith(f"{tmp_path}/conf/fleet.yaml:")
    assert "aliases expand this document past" in message


def test_a_small_alias_bomb_of_254_bytes_is_refused_too(tmp_path):
    bomb = "a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{b}: &{b} [{','.join([f'*{a}'] * 10)}]\n" for a, b in zip("abcde", "bcdef", strict=True)
    )
    start = time.process_time()
    assert "aliases expand" in refusal(tmp_path, bomb)
    assert time.process_time() - start < 1.0


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("a: &a [*a]\n", ":1 not valid YAML: alias *a refers to itself"),
        ("a: *nope\n", ":1 not valid YAML: alias *nope is not defined"),
        ("version: 1\nslices: !foo x\n", ":2 slices: unknown tag '!foo'"),
        ("version: 1\nslices: !!python/name:os.system x\n", ":2 slices: unknown tag 'tag:yaml.org,2002:python/name"),
        ("version: " + "1" * 5000 + "\n", ":1 version: integer of 5000 digits is too large"),
        ("[" * 5000 + "]" * 5000 + "\n", ":1 nested deeper than 64 levels"),
        ("version: 1\nslices: a\x00b\n", ":2 not valid YAML: character U+0000 is not allowed"),
        ("version: 1\nslices: \x1b[31m\n", ":2 not valid YAML: character U+001B is not allowed"),
        (b"version: 1\nslices: caf\xe9\n", ":2 not valid UTF-8 (byte 0xe9)"),
        ("version: 1\n".encode("utf-16"), ":1 the file is UTF-16; save it as UTF-8"),
        ("? [1]\n: 2\n", ":1 (top level): mapping keys must be plain scalars"),
    ],
)
def test_every_decoding_syntax_tag_and_value_error_names_the_full_path_and_line(tmp_path, content, expected):
    message = refusal(tmp_path, content)
    assert message.startswith(f"{tmp_path}/conf/fleet.yaml{expected}"), message


def test_a_huge_worker_range_is_refused_at_once_with_a_short_message(tmp_path):
    start = time.process_time()
    message = refusal(tmp_path, edit("workers: [2]", "workers: 0-200000000"))
    assert time.process_time() - start < 1.0
    assert len(message) < 400, message
    assert "lanes.validation.workers: cannot read worker '0-200000000' (a slice has at most 4096 workers" in message


def test_a_missing_index_list_is_cut_short(tmp_path):
    message = refusal(tmp_path, edit("workers: [2]", "workers: 3-4000"))
    assert "has no worker index 3, 4, 5," in message and "(3978 more)" in message and len(message) < 400


def test_a_name_with_a_trailing_newline_is_not_a_name(tmp_path):
    message = refusal(tmp_path, edit("  validation: {workers", '  "validation\\n": {workers'))
    assert "lanes.validation\n: lane name 'validation\\n' must be letters" in message


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("root", "var/lib/orch", "path 'var/lib/orch' must be absolute"),
        ("root", "-rf", "'-rf' starts with '-'"),
        ("root", '"/var/lib/orch\\nX"', "'/var/lib/orch\\nX' has a control character"),
        ("shared_dir", "mnt/shared", "path 'mnt/shared' must be absolute"),
        ("python", "-c", "'-c' starts with '-'"),
        ("python", "python3 -I", "command 'python3 -I' must be one program"),
        ("python", "bin/python3", "path 'bin/python3' must be absolute"),
        ("user", "-oProxyCommand=x", "starts with '-'"),
    ],
)
def test_worker_paths_commands_and_users_are_checked(tmp_path, field, value, problem):
    message = refusal(tmp_path, edit("  s:\n", f"  s:\n    {field}: {value}\n"))
    assert f"fleet.yaml:4 slices.s.{field}: " in message and problem in message, message


def test_worker_paths_are_normalised():
    from orchestrator.yamlsrc import loads

    fleet = build_fleet(loads(edit("  s:\n", "  s:\n    root: /var//lib/orch/\n"), Path("fleet.yaml")))
    assert fleet.workers[0].root == "/var/lib/orch"


@pytest.mark.parametrize(
    ("address", "ok"),
    [
        ("999.1.1.1", False),
        ("10.0.0.256", False),
        ("1.2.3", False),
        ("'fe80::1::2'", False),
        ("'-oProxyCommand=x'", False),
        ("'host name'", False),
        ("10.0.0.9", True),
        ("'::1'", True),
        ("tpu-w0.example.internal", True),
    ],
)
def test_an_address_is_a_real_ip_address_or_host_name(tmp_path, address, ok):
    content = edit("{index: 0, address: 10.0.0.1}", f"{{index: 0, address: {address}}}")
    if ok:
        path = tmp_path / "fleet.yaml"
        path.write_text(content)
        assert load_fleet(path).workers[0].host == address.strip("'")
    else:
        assert "fleet.yaml:5 slices.s.workers[0].address: " in refusal(tmp_path, content)


def test_a_huge_index_range_on_the_command_line_selects_without_allocating():
    from orchestrator.yamlsrc import loads

    fleet = build_fleet(loads(GOOD, Path("fleet.yaml")))
    picked = select_workers(list(fleet.workers), "1-999999999", fleet_path=fleet.path)
    assert [w.name for w in picked] == ["s-w1", "s-w2"]

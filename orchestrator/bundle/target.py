"""What a bundle's wheels must fit: CPython X.Y on linux x86_64 with the glibc of TPU VM images.

Resolution, the lock's dependency closure and `bundle check` all judge wheels
against this one description, never against the controller that runs pip.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.markers import default_environment
from packaging.tags import Tag, compatible_tags, cpython_tags

MACHINE = "x86_64"
# TPU VM images are Ubuntu 22.04 (glibc 2.35): a manylinux_2_36 wheel would not load there.
MAX_GLIBC = (2, 35)
# Platform tags that predate PEP 600, keyed by the glibc minor version they stand for.
_LEGACY_MANYLINUX = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}


@dataclass(frozen=True)
class WheelTarget:
    """The platform a bundle's wheels are for: CPython `python` on linux `machine`, glibc up to `max_glibc`."""

    python: str
    machine: str = MACHINE
    max_glibc: tuple[int, int] = MAX_GLIBC

    @property
    def version_info(self) -> tuple[int, int]:
        """(major, minor) of the bundle's Python."""
        major, minor = self.python.split(".")
        return int(major), int(minor)

    @property
    def abi(self) -> str:
        """The CPython ABI tag, e.g. cp311."""
        major, minor = self.version_info
        return f"cp{major}{minor}"

    def platforms(self) -> list[str]:
        """Accepted platform tags, most preferred first (pip's own order for a host)."""
        out = []
        for minor in range(self.max_glibc[1], 4, -1):
            out.append(f"manylinux_2_{minor}_{self.machine}")
            if minor in _LEGACY_MANYLINUX:
                out.append(f"{_LEGACY_MANYLINUX[minor]}_{self.machine}")
        out.append(f"linux_{self.machine}")
        return out

    def supported_tags(self) -> list[Tag]:
        """Every wheel tag an installer on the target accepts."""
        platforms = self.platforms()
        return [
            *cpython_tags(self.version_info, abis=[self.abi], platforms=platforms),
            *compatible_tags(self.version_info, "cp", platforms),
        ]

    def pip_args(self) -> list[str]:
        """pip options that make it resolve for the target instead of the interpreter running it."""
        args = ["--python-version", self.python, "--implementation", "cp", "--abi", self.abi]
        for plat in self.platforms():
            args += ["--platform", plat]
        return args

    def marker_environment(self) -> dict[str, str]:
        """PEP 508 marker values on the worker (patch level unknown: .0)."""
        env = {key: str(value) for key, value in default_environment().items()}
        env.update(
            {
                "implementation_name": "cpython",
                "implementation_version": f"{self.python}.0",
                "os_name": "posix",
                "platform_machine": self.machine,
                "platform_system": "Linux",
                "platform_python_implementation": "CPython",
                "python_full_version": f"{self.python}.0",
                "python_version": self.python,
                "sys_platform": "linux",
                "platform_release": "",
                "platform_version": "",
            }
        )
        return env

    def describe(self) -> str:
        """One line for messages, e.g. 'CPython 3.11 on linux x86_64 (glibc <= 2.35)'."""
        return f"CPython {self.python} on linux {self.machine} (glibc <= {self.max_glibc[0]}.{self.max_glibc[1]})"

    def to_json(self) -> dict[str, str]:
        """The target as a lock file records it."""
        return {
            "implementation": "cp",
            "python": self.python,
            "platform": "linux",
            "machine": self.machine,
            "max_glibc": f"{self.max_glibc[0]}.{self.max_glibc[1]}",
        }

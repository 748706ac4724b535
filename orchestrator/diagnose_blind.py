"""The files of the real-log diagnosis corpus, and how each blind set scored the one time it was held back.

The *tune* part (`TUNE_PATHS`) is every file below; signatures may be written from any of
their entries:

- tests/data/diagnosis/corpus.yaml: short excerpts of real failure logs copied
  from public issue threads, collected by the same hand that wrote the
  signature table.
- tests/data/diagnosis/blind-N.yaml, N = 1, 2, ... in the order of `BLIND_SCORES`:
  each collected blind to the table, in the same format, by someone who had not
  seen it; scored once as the held-back part (BLIND_N_HELD_SCORE), then folded
  into tune. Each file's header says how it was collected, checked and scored.

Entries set aside before a blind set was scored (from other stacks, from threads the
table already cited, or labelled two ways) stay in the files `SET_ASIDE` names, each
with its one score beside the set; they are never counted and never tuned on.

The *held-back* part (`HELDBACK_PATH`) is the next set collected blind to the table;
orchestrator/diagnose_corpus.py loads and scores them.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

DATA_DIR = Path(__file__).resolve().parent.parent / "tests" / "data" / "diagnosis"
CORPUS_PATH = DATA_DIR / "corpus.yaml"  # tune: collected by the hand that wrote the table
BLIND_1_PATH = DATA_DIR / "blind-1.yaml"  # tune: the first blind set, scored once as held back
BLIND_2_PATH = DATA_DIR / "blind-2.yaml"  # tune: the second blind set, scored once as held back
BLIND_3_PATH = DATA_DIR / "blind-3.yaml"  # tune: the third blind set, scored once as held back
BLIND_4_PATH = DATA_DIR / "blind-4.yaml"  # tune: the fourth blind set, scored once as held back
BLIND_5_PATH = DATA_DIR / "blind-5.yaml"  # tune: the fifth blind set, scored once as held back
BLIND_6_PATH = DATA_DIR / "blind-6.yaml"  # tune: the sixth blind set, scored once as held back
BLIND_7_PATH = DATA_DIR / "blind-7.yaml"  # tune: the seventh blind set, scored once as held back
BLIND_8_PATH = DATA_DIR / "blind-8.yaml"  # tune: the eighth blind set, scored once as held back
BLIND_9_PATH = DATA_DIR / "blind-9.yaml"  # tune: the ninth blind set, scored once as held back
BLIND_10_PATH = DATA_DIR / "blind-10.yaml"  # tune: the tenth blind set, scored once as held back
BLIND_11_PATH = DATA_DIR / "blind-11.yaml"  # tune: the eleventh blind set, scored once as held back
BLIND_12_PATH = DATA_DIR / "blind-12.yaml"  # tune: the twelfth blind set, scored once as held back
BLIND_13_PATH = DATA_DIR / "blind-13.yaml"  # tune: the thirteenth blind set, scored once as held back
BLIND_14_PATH = DATA_DIR / "blind-14.yaml"  # tune: the fourteenth blind set, scored once as held back
BLIND_15_PATH = DATA_DIR / "blind-15.yaml"  # tune: the fifteenth blind set, scored once as held back
BLIND_16_PATH = DATA_DIR / "blind-16.yaml"  # tune: the sixteenth blind set, scored once as held back
BLIND_17_PATH = DATA_DIR / "blind-17.yaml"  # tune: the seventeenth blind set, scored once as held back
BLIND_18_PATH = DATA_DIR / "blind-18.yaml"  # tune: the eighteenth blind set, scored once as held back
BLIND_19_PATH = DATA_DIR / "blind-19.yaml"  # tune: the nineteenth blind set, scored once as held back
BLIND_20_PATH = DATA_DIR / "blind-20.yaml"  # tune: the twentieth blind set, scored once as held back
BLIND_21_PATH = DATA_DIR / "blind-21.yaml"  # tune: the twenty-first blind set, scored once as held back
BLIND_22_PATH = DATA_DIR / "blind-22.yaml"  # tune: the twenty-second blind set, scored once as held back
BLIND_23_PATH = DATA_DIR / "blind-23.yaml"  # tune: the twenty-third blind set, scored once as held back
BLIND_24_PATH = DATA_DIR / "blind-24.yaml"  # tune: the twenty-fourth blind set, scored once as held back
BLIND_25_PATH = DATA_DIR / "blind-25.yaml"  # tune: the twenty-fifth blind set, scored once as held back
HELDBACK_PATH = DATA_DIR / "heldback.yaml"  # the held-back part (the next set collected blind to the table)


# Why the eleventh and twelfth sets each set entries aside: the collectors' rules admitted GPU
# clusters only for other layers.
GPU_ONLY_CACHES = "on GPU-only compilation caches (Triton's, TorchInductor's on GPU)"


class SetAside(NamedTuple):
    """A blind set's entries set aside when its readers checked it; never counted, never tuned on."""

    path: Path
    why: str  # completes "Its N entries ..." (from other stacks, or whose threads the table cited)
    held_score: tuple[int, int, int, int]  # their one score beside the blind set: (entries, right, unknown, wrong)
    # when the readers' check came: before the set was scored, but for one set checked only afterwards
    when: str = "before scoring"


# The twenty-first set was scored before its readers could check it (the look-up budget was used up).
AFTER_SCORING = "after scoring (its readers checked it only then, before it was tuned on)"
# The blind sets that had entries set aside, each with its set-aside files.
SET_ASIDE: dict[Path, tuple[SetAside, ...]] = {
    BLIND_3_PATH: (
        SetAside(
            DATA_DIR / "blind-3-offstack.yaml", "from other stacks (GPU nodes, other compilers' caches)", (9, 3, 6, 0)
        ),
    ),
    BLIND_6_PATH: (
        SetAside(
            DATA_DIR / "blind-6-offstack.yaml",
            "from other stacks (a GPU spot VM, another accelerator's fork of torch_xla)",
            (2, 0, 2, 0),
        ),
    ),
    BLIND_7_PATH: (
        SetAside(
            DATA_DIR / "blind-7-offstack.yaml", "from another stack (another accelerator's PyTorch build)", (1, 0, 1, 0)
        ),
    ),
    BLIND_8_PATH: (
        SetAside(DATA_DIR / "blind-8-offstack.yaml", "from another stack (a GPU-only memory failure)", (1, 0, 1, 0)),
        SetAside(
            DATA_DIR / "blind-8-cited.yaml",
            "whose threads the table already cited as signature sources",
            (2, 2, 0, 0),
        ),
    ),
    BLIND_9_PATH: (
        SetAside(
            DATA_DIR / "blind-9-disputed.yaml",
            "whose label the reader who checked the set against its threads did not find supported",
            (1, 0, 1, 0),
        ),
    ),
    BLIND_10_PATH: (
        SetAside(DATA_DIR / "blind-10-offstack.yaml", "from another stack (TensorFlow's own TPU stack)", (1, 0, 1, 0)),
        SetAside(
            DATA_DIR / "blind-10-cited.yaml",
            "whose thread the table already cited as a signature source",
            (1, 1, 0, 0),
        ),
        SetAside(
            DATA_DIR / "blind-10-disputed.yaml",
            "from one thread that two of its collectors labelled with different layers",
            (2, 1, 0, 1),
        ),
    ),
    BLIND_11_PATH: (
        SetAside(
            DATA_DIR / "blind-11-offstack.yaml",
            GPU_ONLY_CACHES,
            (6, 0, 6, 0),
        ),
    ),
    BLIND_12_PATH: (
        SetAside(
            DATA_DIR / "blind-12-offstack.yaml",
            GPU_ONLY_CACHES,
            (3, 0, 2, 1),
        ),
    ),
    BLIND_13_PATH: (
        SetAside(
            DATA_DIR / "blind-13-offstack.yaml",
            "from GPU machines, on device ownership and backend discovery",
            (4, 1, 3, 0),
        ),
    ),
    BLIND_14_PATH: (
        SetAside(
            DATA_DIR / "blind-14-offstack.yaml",
            "from other stacks (GPU hardware faults, a web service's model-download cache)",
            (3, 1, 2, 0),
        ),
        SetAside(
            DATA_DIR / "blind-14-disputed.yaml",
            "whose label or excerpt the readers who checked the set against its threads did not find supported",
            (2, 1, 0, 1),
        ),
    ),
    BLIND_15_PATH: (
        SetAside(
            DATA_DIR / "blind-15-offstack.yaml",
            "from other stacks (a serverless framework's SSH key bug, an MPI storage benchmark on Lustre)",
            (2, 1, 0, 1),
        ),
    ),
    BLIND_16_PATH: (
        SetAside(
            DATA_DIR / "blind-16-offstack.yaml",
            "from other stacks (GPU hardware faults, a bare MPI launcher's hostfile bug, a GPU inference "
            "server's Triton cache)",
            (4, 1, 1, 2),
        ),
    ),
    BLIND_17_PATH: (
        SetAside(
            DATA_DIR / "blind-17-offstack.yaml",
            "from other stacks (a GPU-sharing library's interception bug, a CUDA-only startup failure)",
            (2, 0, 1, 1),
        ),
        SetAside(
            DATA_DIR / "blind-17-copy.yaml",
            "whose thread is a copy, moved to another repository, of one the tune part already quotes",
            (1, 1, 0, 0),
        ),
    ),
    BLIND_18_PATH: (
        SetAside(
            DATA_DIR / "blind-18-offstack.yaml",
            "from other stacks (SSH to a Nix project's build machines and to a desktop project's test VMs, "
            "a TensorFlow desktop application's host memory)",
            (3, 1, 2, 0),
        ),
        SetAside(
            DATA_DIR / "blind-18-disputed.yaml",
            "whose label a checking reader did not find supported (a Docker-masqueraded network between hosts, "
            "labelled collective, read as transport)",
            (1, 0, 1, 0),
        ),
    ),
    BLIND_19_PATH: (
        SetAside(
            DATA_DIR / "blind-19-offstack.yaml",
            "from other stacks (a plain server's login out of memory, two TensorFlow jobs on GPU clusters)",
            (3, 0, 3, 0),
        ),
    ),
    BLIND_20_PATH: (
        SetAside(
            DATA_DIR / "blind-20-unchecked.yaml",
            "whose thread no checking reader could reach (neither its excerpt nor its label checked)",
            (1, 1, 0, 0),
        ),
    ),
    BLIND_21_PATH: (
        SetAside(
            DATA_DIR / "blind-21-unchecked.yaml",
            "whose thread no checking reader could reach (neither its excerpt nor its label checked)",
            (1, 0, 1, 0),
            AFTER_SCORING,
        ),
        SetAside(
            DATA_DIR / "blind-21-disputed.yaml",
            "that the checking readers found labelled two ways (an installer's own bug, an environment rebuilt)",
            (2, 1, 1, 0),
            AFTER_SCORING,
        ),
    ),
    BLIND_22_PATH: (
        SetAside(
            DATA_DIR / "blind-22-disputed.yaml",
            "that the checking readers found labelled two ways or labelled only from other threads",
            (4, 2, 2, 0),
        ),
    ),
    BLIND_23_PATH: (
        SetAside(
            DATA_DIR / "blind-23-disputed.yaml",
            "that the checking readers found labelled two ways (a guess or the reporter's own reading, unconfirmed)",
            (4, 1, 1, 2),
        ),
    ),
    BLIND_24_PATH: (
        SetAside(
            DATA_DIR / "blind-24-disputed.yaml",
            "that the checking readers found labelled two ways (a guess, another thread quoted, a download cache, a"
            " fix to the project's own build or tests)",
            (5, 2, 3, 0),
        ),
        SetAside(
            DATA_DIR / "blind-24-offstack.yaml",
            "from another stack (TensorFlow's backend of a project that also runs on PyTorch)",
            (1, 1, 0, 0),
        ),
        SetAside(
            DATA_DIR / "blind-24-unchecked.yaml",
            "whose threads no checking reader could reach (neither excerpt nor label checked)",
            (2, 1, 1, 0),
        ),
    ),
    BLIND_25_PATH: (
        SetAside(
            DATA_DIR / "blind-25-disputed.yaml",
            "that the checking readers found labelled two ways (a harness's process layout, a scheduler's bug, an"
            " unconfirmed reading, an image built for another GPU)",
            (4, 0, 4, 0),
        ),
        SetAside(
            DATA_DIR / "blind-25-offstack.yaml",
            "from another stack (Lua Torch's cuDNN bindings, not PyTorch)",
            (1, 1, 0, 0),
        ),
    ),
}
# How each blind set scored the one time it was the held-back part, before it was tuned on:
# layer -> (entries, right, unknown, wrong).
BLIND_1_HELD_SCORE: dict[str, tuple[int, int, int, int]] = {
    "transport": (20, 17, 3, 0),
    "device-ownership": (5, 5, 0, 0),
    "runtime-proof": (6, 2, 4, 0),
    "bundle-skew": (11, 8, 1, 2),
    "cache": (3, 1, 2, 0),
    "memory": (8, 8, 0, 0),
    "collective": (13, 11, 2, 0),
    "disk": (5, 4, 0, 1),
    "hardware": (2, 1, 1, 0),
    "other": (4, 4, 0, 0),
}
BLIND_2_HELD_SCORE: dict[str, tuple[int, int, int, int]] = {
    "transport": (19, 15, 4, 0),
    "device-ownership": (3, 1, 2, 0),
    "runtime-proof": (7, 4, 3, 0),
    "bundle-skew": (12, 10, 2, 0),
    "cache": (3, 0, 3, 0),
    "memory": (9, 6, 2, 1),
    "collective": (11, 5, 6, 0),
    "disk": (5, 5, 0, 0),
    "hardware": (2, 0, 1, 1),
    "other": (4, 2, 0, 2),
}
BLIND_3_HELD_SCORE: dict[str, tuple[int, int, int, int]] = {
    "transport": (12, 9, 3, 0),
    "device-ownership": (3, 1, 2, 0),
    "runtime-proof": (8, 6, 2, 0),
    "bundle-skew": (15, 11, 4, 0),
    "cache": (2, 0, 2, 0),
    "memory": (9, 7, 2, 0),
    "collective": (9, 6, 3, 0),
    "disk": (6, 3, 3, 0),
    "hardware": (1, 0, 1, 0),
    "other": (6, 6, 0, 0),
}
BLIND_4_HELD_SCORE: dict[str, tuple[int, int, int, int]] = {
    "transport": (13, 9, 3, 1),
    "runtime-proof": (5, 1, 4, 0),
    "bundle-skew": (23, 14, 9, 0),
    "cache": (4, 1, 3, 0),
    "memory": (6, 5, 1, 0),
    "collective": (7, 3, 4, 0),
    "disk": (3, 2, 1, 0),
    "hardware": (1, 0, 1, 0),
    "other": (4, 4, 0, 0),
}
BLIND_5_HELD_SCORE: dict[str, tuple[int, int, int, int]] = {
    "transport": (8, 4, 4, 0),
    "device-ownership": (1, 1, 0, 0),
    "runtime-proof": (8, 6, 1, 1),
    "bundle-skew": (11, 8, 3, 0),
    "cache": (1, 0, 1, 0),
    "memory": (8, 3, 5, 0),
    "collective": (8, 6, 2, 0),
    "disk": (8, 8, 0, 0),
    "hardware": (3, 0, 3, 0),
    "other": (5, 5, 0, 0),
}
BLIND_6_HELD_SCORE: dict[str, tuple[int, int, int, int]] = {
    "transport": (13, 4, 9, 0),
    "device-ownership": (3, 3, 0, 0),
    "runtime-proof": (4, 1, 2, 1),
    "bundle-skew": (10, 8, 2, 0),
    "cache": (1, 0, 1, 0),
    "memory": (11, 6, 5, 0),
    "collective": (5, 2, 3, 0),
    "disk": (7, 5, 2, 0),
    "hardware": (1, 0, 1, 0),
    "other": (2, 2, 0, 0),
}
BLIND_7_HELD_SCORE: dict[str, tuple[int, int, int, int]] = {
    "transport": (8, 5, 3, 0),
    "device-ownership": (3, 1, 1, 1),
    "runtime-proof": (2, 1, 1, 0),
    "bundle-skew": (11, 6, 3, 2),
    "cache": (1, 0, 1, 0),
    "memory": (4, 1, 3, 0),
    "collective": (3, 2, 1, 0),
    "disk": (4, 4, 0, 0),
    "hardware": (1, 0, 1, 0),
    "other": (3, 2, 0, 1),
}
BLIND_8_HELD_SCORE: dict[str, tuple[int, int, int, int]] = {
    "transport": (14, 14, 0, 0),
    "runtime-proof": (5, 1, 4, 0),
    "bundle-skew": (24, 15, 8, 1),
    "cache": (1, 1, 0, 0),
    "memory": (7, 6, 1, 0),
    "collective": (11, 8, 3, 0),
    "disk": (7, 6, 1, 0),
    "other": (6, 5, 0, 1),
}
BLIND_9_HELD_SCORE: dict[str, tuple[int, int, int, int]] = {
    "transport": (9, 7, 2, 0),
    "runtime-proof": (6, 1, 5, 0),
    "bundle-skew": (16, 11, 5, 0),
    "cache": (1, 0, 1, 0),
    "memory": (4, 3, 0, 1),
    "collective": (2, 1, 1, 0),
    "disk": (9, 4, 5, 0),
    "hardware": (2, 0, 1, 1),
    "other": (5, 5, 0, 0),
}
BLIND_10_HELD_SCORE: dict[str, tuple[int, int, int, int]] = {
    "transport": (5, 3, 1, 1),
    "runtime-proof": (2, 1, 1, 0),
    "bundle-skew": (13, 8, 4, 1),
    "memory": (3, 2, 1, 0),
    "collective": (1, 1, 0, 0),
    "disk": (3, 0, 3, 0),
    "other": (9, 7, 0, 2),
}
BLIND_11_HELD_SCORE: dict[str, tuple[int, int, int, int]] = {
    "transport": (7, 4, 3, 0),
    "device-ownership": (2, 1, 1, 0),
    "runtime-proof": (4, 2, 2, 0),
    "bundle-skew": (8, 5, 3, 0),
    "cache": (1, 0, 1, 0),
    "memory": (5, 2, 3, 0),
    "collective": (4, 1, 3, 0),
    "disk": (3, 2, 1, 0),
    "other": (4, 2, 0, 2),
}
BLIND_12_HELD_SCORE: dict[str, tuple[int, int, int, int]] = {
    "transport": (6, 6, 0, 0),
    "device-ownership": (1, 0, 1, 0),
    "runtime-proof": (1, 0, 1, 0),
    "bundle-skew": (17, 9, 7, 1),
    "cache": (1, 0, 1, 0),
    "memory": (6, 4, 2, 0),
    "collective": (6, 4, 2, 0),
    "disk": (3, 0, 2, 1),
    "other": (4, 2, 0, 2),
}
BLIND_13_HELD_SCORE: dict[str, tuple[int, int, int, int]] = {
    "transport": (6, 4, 2, 0),
    "runtime-proof": (2, 1, 1, 0),
    "bundle-skew": (15, 11, 4, 0),
    "cache": (3, 2, 1, 0),
    "memory": (5, 1, 4, 0),
    "collective": (3, 3, 0, 0),
    "disk": (2, 1, 1, 0),
    "other": (3, 3, 0, 0),
}
BLIND_14_HELD_SCORE: dict[str, tuple[int, int, int, int]] = {
    "transport": (3, 3, 0, 0),
    "device-ownership": (1, 0, 0, 1),
    "runtime-proof": (1, 1, 0, 0),
    "bundle-skew": (17, 10, 6, 1),
    "cache": (1, 0, 1, 0),
    "memory": (4, 2, 2, 0),
    "collective": (2, 2, 0, 0),
    "disk": (5, 3, 1, 1),
    "hardware": (1, 0, 1, 0),
    "other": (2, 2, 0, 0),
}
BLIND_15_HELD_SCORE: dict[str, tuple[int, int, int, int]] = {
    "transport": (4, 3, 1, 0),
    "runtime-proof": (1, 0, 0, 1),
    "bundle-skew": (17, 12, 5, 0),
    "memory": (6, 3, 3, 0),
    "collective": (3, 0, 3, 0),
    "disk": (5, 5, 0, 0),
    "other": (1, 1, 0, 0),
}
BLIND_16_HELD_SCORE: dict[str, tuple[int, int, int, int]] = {
    "transport": (6, 5, 1, 0),
    "bundle-skew": (4, 4, 0, 0),
    "cache": (1, 0, 1, 0),
    "memory": (2, 1, 1, 0),
    "collective": (5, 4, 1, 0),
    "disk": (2, 1, 1, 0),
    "other": (2, 2, 0, 0),
}
BLIND_17_HELD_SCORE: dict[str, tuple[int, int, int, int]] = {
    "transport": (8, 3, 4, 1),
    "bundle-skew": (4, 2, 1, 1),
    "memory": (1, 1, 0, 0),
    "disk": (2, 0, 2, 0),
}
BLIND_18_HELD_SCORE: dict[str, tuple[int, int, int, int]] = {
    "transport": (6, 2, 3, 1),
    "device-ownership": (1, 1, 0, 0),
    "runtime-proof": (1, 0, 1, 0),
    "bundle-skew": (12, 6, 5, 1),
    "cache": (3, 0, 3, 0),
    "memory": (3, 0, 3, 0),
    "collective": (2, 1, 1, 0),
    "disk": (3, 1, 2, 0),
}
BLIND_19_HELD_SCORE: dict[str, tuple[int, int, int, int]] = {
    "transport": (4, 4, 0, 0),
    "runtime-proof": (1, 0, 1, 0),
    "bundle-skew": (10, 6, 3, 1),
    "memory": (3, 2, 0, 1),
    "collective": (2, 2, 0, 0),
    "disk": (4, 4, 0, 0),
    "other": (2, 2, 0, 0),
}
BLIND_20_HELD_SCORE: dict[str, tuple[int, int, int, int]] = {
    "transport": (4, 0, 4, 0),
    "device-ownership": (1, 0, 1, 0),
    "runtime-proof": (1, 0, 1, 0),
    "bundle-skew": (5, 1, 3, 1),
    "cache": (1, 0, 1, 0),
    "memory": (2, 1, 1, 0),
    "collective": (3, 1, 2, 0),
    "disk": (1, 1, 0, 0),
    "other": (2, 2, 0, 0),
}
BLIND_21_HELD_SCORE: dict[str, tuple[int, int, int, int]] = {
    "runtime-proof": (2, 1, 0, 1),
    "bundle-skew": (9, 8, 1, 0),
    "memory": (2, 1, 1, 0),
    "collective": (1, 1, 0, 0),
}
BLIND_22_HELD_SCORE: dict[str, tuple[int, int, int, int]] = {
    "transport": (1, 1, 0, 0),
    "bundle-skew": (10, 6, 4, 0),
    "cache": (1, 0, 1, 0),
    "memory": (4, 3, 1, 0),
    "collective": (1, 1, 0, 0),
    "disk": (3, 2, 1, 0),
    "hardware": (3, 1, 2, 0),
    "other": (1, 1, 0, 0),
}
BLIND_23_HELD_SCORE: dict[str, tuple[int, int, int, int]] = {
    "transport": (1, 0, 1, 0),
    "bundle-skew": (5, 2, 3, 0),
    "memory": (2, 1, 1, 0),
    "collective": (1, 1, 0, 0),
    "disk": (1, 0, 1, 0),
    "other": (2, 1, 0, 1),
}
BLIND_24_HELD_SCORE: dict[str, tuple[int, int, int, int]] = {
    "bundle-skew": (2, 2, 0, 0),
    "memory": (3, 3, 0, 0),
    "disk": (2, 1, 1, 0),
    "other": (2, 1, 0, 1),
}
BLIND_25_HELD_SCORE: dict[str, tuple[int, int, int, int]] = {
    "transport": (3, 2, 0, 1),
    "runtime-proof": (1, 0, 1, 0),
    "bundle-skew": (6, 5, 1, 0),
    "cache": (1, 0, 1, 0),
    "memory": (2, 2, 0, 0),
    "collective": (1, 1, 0, 0),
    "disk": (4, 3, 0, 1),
    "other": (2, 2, 0, 0),
}
# The blind sets in the order they were collected, each with its once-scored held-back figures.
BLIND_SCORES: tuple[tuple[Path, dict[str, tuple[int, int, int, int]]], ...] = (
    (BLIND_1_PATH, BLIND_1_HELD_SCORE),
    (BLIND_2_PATH, BLIND_2_HELD_SCORE),
    (BLIND_3_PATH, BLIND_3_HELD_SCORE),
    (BLIND_4_PATH, BLIND_4_HELD_SCORE),
    (BLIND_5_PATH, BLIND_5_HELD_SCORE),
    (BLIND_6_PATH, BLIND_6_HELD_SCORE),
    (BLIND_7_PATH, BLIND_7_HELD_SCORE),
    (BLIND_8_PATH, BLIND_8_HELD_SCORE),
    (BLIND_9_PATH, BLIND_9_HELD_SCORE),
    (BLIND_10_PATH, BLIND_10_HELD_SCORE),
    (BLIND_11_PATH, BLIND_11_HELD_SCORE),
    (BLIND_12_PATH, BLIND_12_HELD_SCORE),
    (BLIND_13_PATH, BLIND_13_HELD_SCORE),
    (BLIND_14_PATH, BLIND_14_HELD_SCORE),
    (BLIND_15_PATH, BLIND_15_HELD_SCORE),
    (BLIND_16_PATH, BLIND_16_HELD_SCORE),
    (BLIND_17_PATH, BLIND_17_HELD_SCORE),
    (BLIND_18_PATH, BLIND_18_HELD_SCORE),
    (BLIND_19_PATH, BLIND_19_HELD_SCORE),
    (BLIND_20_PATH, BLIND_20_HELD_SCORE),
    (BLIND_21_PATH, BLIND_21_HELD_SCORE),
    (BLIND_22_PATH, BLIND_22_HELD_SCORE),
    (BLIND_23_PATH, BLIND_23_HELD_SCORE),
    (BLIND_24_PATH, BLIND_24_HELD_SCORE),
    (BLIND_25_PATH, BLIND_25_HELD_SCORE),
)
BLIND_PATHS = tuple(path for path, _ in BLIND_SCORES)
TUNE_PATHS = (CORPUS_PATH, *BLIND_PATHS)

# How docs/troubleshooting.md names each blind set, in the order of BLIND_SCORES.
ORDINALS = (
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
    "eleventh",
    "twelfth",
    "thirteenth",
    "fourteenth",
    "fifteenth",
    "sixteenth",
    "seventeenth",
    "eighteenth",
    "nineteenth",
    "twentieth",
    "twenty-first",
    "twenty-second",
    "twenty-third",
    "twenty-fourth",
    "twenty-fifth",
)

"""How fast `orch diagnose` reads a worker's log: the literal index against searching every signature.

`orch diagnose RUN` reads up to the last 64 MiB of each worker's log (MAX_LOG_BYTES) and matches
every line against the signature table. This builds one log in the shapes training logs have
(JAX and torch_xla INFO lines, progress bars, launcher prefixes) with real failure excerpts from
the tune corpus spliced in, and runs `diagnose.verdict` on it twice in one run, side by side:

  - now: the literal index (orchestrator/diagnose_literals.py) picks the signatures a line may match;
  - before: every signature is searched on every line (the index told that nothing is known).

It prints lines per second for each, the ratio, whether the two runs found the same lines and
verdict (they must), and the time the measured rate gives a 64 MiB log.

    .venv/bin/python bench/diagnose_speed.py [--lines 100000] [--smoke]

--smoke: 3000 lines.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from orchestrator import diagnose  # noqa: E402
from orchestrator.diagnose_corpus import load_tune  # noqa: E402
from orchestrator.diagnose_literals import LiteralIndex  # noqa: E402
from orchestrator.diagnose_run import MAX_LOG_BYTES  # noqa: E402
from orchestrator.diagnose_table import SIGNATURES  # noqa: E402

# One failure excerpt per this many lines of healthy output.
EXCERPT_EVERY = 2000


def healthy_line(rng: random.Random, i: int) -> str:
    """One line of a training run going well, in one of the shapes real logs have."""
    kind = i % 5
    if kind == 0:
        return (
            f"I1129 06:{i % 60:02d}:{i % 59:02d}.{rng.randrange(10**6):06d} {rng.randrange(1000, 99999)} "
            f"train.py:{rng.randrange(50, 900)}] step {i} loss {rng.random():.4f} lr 3.0e-04 "
            f"tokens/s {rng.randrange(1000, 90000)} mfu {rng.random():.2f}"
        )
    if kind == 1:
        return f"[rank{i % 8}]: epoch 3 | batch {i} | grad_norm {rng.random():.3f} | {rng.random() * 100:.1f} samples/s"
    if kind == 2:
        return f"{i % 100:3d}%|{'#' * (i % 40):<40}| {i}/100000 [01:{i % 60:02d}<12:00, {rng.random() * 9:.2f}it/s]"
    if kind == 3:
        return (
            f"INFO:absl:[{i}] eval/accuracy={rng.random():.4f}, eval/loss={rng.random():.4f}, "
            f"throughput/device={rng.random() * 1000:.1f}"
        )
    return (
        f"2026-11-29 06:{i % 60:02d}:{i % 59:02d},{rng.randrange(1000):03d} - INFO - Saved checkpoint "
        f"gs://bucket/run-{i // 1000}/step_{i} ({rng.randrange(100, 900)} MB)"
    )


def build_log(lines: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    excerpts = [entry.excerpt for entry in load_tune()]
    rng.shuffle(excerpts)
    out: list[str] = []
    for i in range(lines):
        if i % EXCERPT_EVERY == EXCERPT_EVERY - 1:
            out.extend(excerpts[(i // EXCERPT_EVERY) % len(excerpts)].splitlines())
        out.append(healthy_line(rng, i))
    return "\n".join(out) + "\n"


def timed(text: str) -> tuple[float, diagnose.Verdict, list[diagnose.Finding]]:
    start = time.perf_counter()
    answer = diagnose.verdict(text)
    seconds = time.perf_counter() - start
    return seconds, answer, diagnose.classify(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=100_000, help="healthy lines in the log (default 100000)")
    parser.add_argument("--smoke", action="store_true", help="3000 lines")
    args = parser.parse_args()
    lines = 3000 if args.smoke else args.lines

    text = build_log(lines)
    n_lines = text.count("\n")
    n_bytes = len(text.encode())
    print(f"log: {n_lines} lines, {n_bytes / 2**20:.1f} MiB, {len(SIGNATURES)} signatures")

    now_s, now_verdict, now_found = timed(text)
    index = diagnose._literal_index
    searched_all = LiteralIndex([None] * len(SIGNATURES))  # nothing known: every signature searched
    diagnose._literal_index = lambda: searched_all  # type: ignore[assignment]
    try:
        before_s, before_verdict, before_found = timed(text)
    finally:
        diagnose._literal_index = index  # type: ignore[assignment]

    same = now_found == before_found and now_verdict == before_verdict
    for name, seconds in (("literal index (now)", now_s), ("every signature searched (before)", before_s)):
        rate = n_lines / seconds
        full = MAX_LOG_BYTES / n_bytes * seconds
        print(f"{name:<36} {rate:>10.0f} lines/s  {seconds:7.2f} s   64 MiB log: {full:6.0f} s")
    print(f"ratio before / now                   {before_s / now_s:.1f}x")
    print(f"same findings and verdict            {'yes' if same else 'NO'} ({len(now_found)} findings)")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())

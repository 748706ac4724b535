"""A bench/diagnose_history.py variant: today's rule for where a log stops
(orchestrator/diagnose_stall.py) applied to each old table's "unknown" answers, as
orchestrator.diagnose.verdict applies it last.

    .venv/bin/python bench/diagnose_history.py --variant bench/diagnose_variants/stall.py
"""

import sys
from pathlib import Path

import orchestrator.diagnose as old  # the table this blind set was held back from

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _today  # noqa: E402

stall = _today.load("diagnose_stall")
_today.wrap(old, lambda text, v: stall.stall_layer(text))

"""The compilation-cache evidence of a process: entries on disk and each frontend's counters.

`count_entries` counts a frontend's cache directory; `JaxEvidence` listens to
jax.monitoring's compilation-cache and compile events; `torch_xla_evidence`
reads torch_xla's persistent-cache metrics at exit.
"""

from __future__ import annotations

import os
import threading
from typing import Any

FRONTENDS = ("jax", "torch_xla")
# What counts as one cache entry on disk, per frontend: jax writes `<key>-cache`
# (and `<key>-atime` beside it); torch_xla one file per graph hash (named by
# the hash alone in 2.9, `<hash>.bin` in some older lines): every visible file.
ENTRY_SUFFIX = {"jax": "-cache", "torch_xla": None}

JAX_HITS = "/jax/compilation_cache/cache_hits"
JAX_MISSES = "/jax/compilation_cache/cache_misses"
JAX_REQUESTS = "/jax/compilation_cache/compile_requests_use_cache"
JAX_USING = "/jax/compilation_cache/tasks_using_cache"
JAX_SAVED = "/jax/compilation_cache/compile_time_saved_sec"
JAX_RETRIEVAL = "/jax/compilation_cache/cache_retrieval_time_sec"
JAX_COMPILE = "/jax/core/compile/backend_compile_duration"


def count_entries(path: str | None, frontend: str) -> dict[str, Any]:
    """{path, exists, entries, bytes, last_write} of one frontend's cache directory."""
    exists = bool(path) and os.path.isdir(str(path))
    out: dict[str, Any] = {"path": path, "exists": exists, "entries": 0, "bytes": 0, "last_write": None}
    if not path or not exists:
        return out
    suffix = ENTRY_SUFFIX.get(frontend)
    last: float | None = None
    entries = size = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                st = os.stat(os.path.join(dirpath, name))
            except OSError:
                continue
            size += st.st_size
            last = st.st_mtime if last is None else max(last, st.st_mtime)
            if (suffix and name.endswith(suffix)) or (not suffix and not name.startswith(".")):
                entries += 1
    out.update(entries=entries, bytes=size, last_write=last)
    return out


class JaxEvidence:
    """Counts JAX's compilation-cache and compile events (jax.monitoring listeners)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: dict[str, int] = {}
        self.durations: dict[str, float] = {}
        self.duration_counts: dict[str, int] = {}
        self.writes_refused = 0

    def on_event(self, event: str, **_kwargs: Any) -> None:
        with self.lock:
            self.counts[event] = self.counts.get(event, 0) + 1

    def on_duration(self, event: str, duration: float, **_kwargs: Any) -> None:
        with self.lock:
            self.durations[event] = self.durations.get(event, 0.0) + float(duration)
            self.duration_counts[event] = self.duration_counts.get(event, 0) + 1

    def summary(self) -> dict[str, Any]:
        with self.lock:
            c, d, n = dict(self.counts), dict(self.durations), dict(self.duration_counts)
        hits, requests = c.get(JAX_HITS, 0), c.get(JAX_REQUESTS, 0)
        # jax 0.10 records its `cache_misses` event when it writes an entry
        # (compilation_cache.put_executable_and_time), so a miss here is a
        # lookup that found nothing, and the event counts writes.
        return {
            "cache_hits": hits,
            "cache_misses": max(requests - hits, 0),
            "cache_writes": c.get(JAX_MISSES, 0),
            "compile_time_saved_sec": round(d.get(JAX_SAVED, 0.0), 4),
            "compile_time_sec": round(d.get(JAX_COMPILE, 0.0), 4),
            "compiles": n.get(JAX_COMPILE, 0),
            "cache_requests": requests,
            "cache_used": c.get(JAX_USING, 0) > 0,
            "cache_retrieval_time_sec": round(d.get(JAX_RETRIEVAL, 0.0), 4),
            "writes_refused": self.writes_refused,
        }


def torch_xla_evidence() -> dict[str, Any]:
    """torch_xla's persistent-cache counters and compile time (its metrics, read at exit)."""
    import torch_xla.debug.metrics as met

    def counter(name: str) -> int:
        value = met.counter_value(name)
        return int(value) if value else 0

    data = met.metric_data("CompileTime")  # (count, accumulated nanoseconds, samples)
    return {
        "cache_hits": counter("PersistentCacheHit"),
        "cache_misses": counter("PersistentCacheMiss"),
        "compile_time_saved_sec": None,
        "compile_time_sec": round(data[1] / 1e9, 4) if data else 0.0,
        "compiles": int(data[0]) if data else 0,
        "deserialize_failures": counter("PersistentCacheDeserializeFailure"),
    }

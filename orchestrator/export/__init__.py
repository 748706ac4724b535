"""Exports of a lane to other schedulers: the same bundle, policy, cache and receipts contract.

- `gke`: Cloud TPU accelerator types to GKE node labels, topology and chips (one table);
- `jobset`: `orch export jobset`, a lane as a JobSet (jobset.x-k8s.io/v1alpha2) whose pods
  install the locked bundle, probe the runtime and run hostside.launcher through
  hostside/jobset_entry.py.
"""

from orchestrator.export.gke import GkeTpu, gke_tpu
from orchestrator.export.jobset import JobSetExport, JobSetOptions, export_jobset, render_yaml

__all__ = ["GkeTpu", "JobSetExport", "JobSetOptions", "export_jobset", "gke_tpu", "render_yaml"]

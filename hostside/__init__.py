"""Code that runs on workers under their plain Python (stdlib only).

The controller pushes this package to every worker (content-addressed by
its digest) and runs one module per job with `python3 -m hostside.<job>`.
Each job speaks one JSON document on stdout (with `schema_version`) and logs
on stderr. Frontends (jax, torch, torch_xla) are imported only inside the
functions that run under a bundle's Python.
"""

SCHEMA_VERSION = 1

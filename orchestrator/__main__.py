"""`python -m orchestrator` is `orch`."""

from orchestrator.cli import main

if __name__ == "__main__":
    main(prog_name="orch")

"""`python -m orchestrator` is `orch`."""

from orchestrator.entry import main

if __name__ == "__main__":
    main()

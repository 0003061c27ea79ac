"""``python -m latentfs``: the ``latentfs`` command through the running interpreter (the console script's twin,
for an environment whose ``bin/`` folder is not on PATH)."""

from latentfs.cli import main

if __name__ == "__main__":
    raise SystemExit(main())

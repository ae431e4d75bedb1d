"""`python -m cclab`: the same CLI as the `cclab` command."""

from cclab.cli import app

# Guarded so worker processes that re-import the main module (spawn/forkserver) do not
# start the CLI again.
if __name__ == "__main__":
    app(prog_name="cclab")

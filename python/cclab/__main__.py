from cclab.cli import app

app(prog_name="cclab")

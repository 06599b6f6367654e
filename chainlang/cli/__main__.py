"""`python -m chainlang.cli`: the same command as `chainlang`."""

from chainlang.cli.main import main

main(prog_name="chainlang")

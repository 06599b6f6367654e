"""`python -m chainlang`: the same command as `chainlang`."""

from chainlang.cli import main

main(prog_name="chainlang")

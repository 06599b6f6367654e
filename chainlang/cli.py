"""The `chainlang` command. Imports are lazy: `--help` must stay fast."""

from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="chainlang")
def main() -> None:
    """chainlang: check and run declarative YAML event chains."""

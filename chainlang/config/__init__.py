"""Project configuration: `chainlang.toml`, found from a path upwards (`project`), and
its validated model (`model`)."""

"""Load: YAML text → a tree of positioned nodes (`loader`, over libyaml's C event stream,
bounded in size, depth and aliases), with source positions (`source`) and the columns
of characters inside scalars (`scalar_offsets`) for diagnostics inside expressions."""

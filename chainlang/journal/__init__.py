"""The run journal: how a run's transcript is sealed, locked and (later) typed.

- `integrity`: every line carries a MAC chained from the line before it, keyed with the
  project's transcript key, so an edited, removed or reordered record is found.
- `lock`: one process at a time runs or resumes a transcript; the lock file also holds
  the sealed head (last seq and MAC), so records removed from the end are found too.
"""

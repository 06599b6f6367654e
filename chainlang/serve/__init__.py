"""`chainlang serve` (LANGUAGE.md §12): the long-running process of a project.

- `scheduler.py`: fires due tasks once each (leases, runs, dead letters, misfire), on an
  injectable clock; quarantines the task rows it cannot read;
- `transcript_locks.py`: the firings' transcript locks (held from before a run is recorded
  until its end is; a firing whose lease ran out is left to the live process holding it);
- `engine.py`: takes external events (claim, fire the hooks, answer once recorded), fires
  a task's action, takes up what a stopped serve left;
- `app.py`: the HTTP routes (aiohttp), the bearer token, request limits;
- `metrics.py`: `/metrics` in Prometheus text;
- `process.py`: start, listen, stop (SIGTERM drains within a grace period).

Nothing here is imported unless `chainlang serve` runs (aiohttp and prometheus_client are
the `serve` extra).
"""

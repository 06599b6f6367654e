"""The task system (LANGUAGE.md §12): scheduled tasks and stored hooks, kept in the
project's store. `when` reads schedules (`at`, `interval`, `cron`) against a clock."""

"""The engines that run chains (LANGUAGE.md §14).

The embedded engine is chainlang.runtime itself: the walker, its steps and their tools in
this process. `temporal/` runs the same walker as a Temporal workflow: the workflow keeps
the run's records, each tool attempt is an activity on a worker of `chainlang worker`, and
`chainlang run` submits the run and follows it, writing the same transcript.
"""

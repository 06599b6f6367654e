"""Chains on Temporal: the workflow (`workflow.py`), the tool activity (`activities.py`),
the worker process (`worker.py`), submitting and following a run (`submit.py`), and what the
engine runs so far (`support.py`, which the checker asks). The SDK (`temporalio`, the extra
`chainlang[temporal]`) is imported only by these modules."""

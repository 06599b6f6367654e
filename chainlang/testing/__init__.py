"""Testing chains: `*.chaintest.yaml` files run by pytest (the plugin, chainlang.testing.plugin),
and `ChainProject` for Python tests (the `chain_project` fixture).

A test copies the project, runs chains and emits events in the copy with tool fakes and
scripted model answers, and checks the outputs, the transcript's records, the calls the
fakes got, the hooks that fired, or a golden transcript.
"""

from chainlang.testing.project import ChainProject, StepResult
from chainlang.testing.spec import ChaintestError, load_test_file

__all__ = ["ChainProject", "ChaintestError", "StepResult", "load_test_file"]

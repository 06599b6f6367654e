"""JSON Schema, in one home.

- `safe`: validators for untrusted schemas (draft-07, never fetching a `$ref`, patterns
  matched with RE2), what makes a schema unusable, JSON kinds.
- `fast`: an exact compiled predicate for the common subset (~0.4 µs instead of ~13 µs).
- `cache`: the one cache of both, per distinct schema; `messages()` explains what is
  invalid, `checker()` answers fast and explains only when it must. Every validation of
  params, results, inputs and payloads (checker, decide model, runtime) goes through it.
- `from_python`, `signatures`: schemas of Python tools (pydantic models, signatures).
"""

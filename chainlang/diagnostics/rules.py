"""The catalogue of rule ids. Ids are stable: never renumber, only add.

Each rule has a reference page `docs/checks/<slug>.md`; a test keeps the two in step.
"""

from __future__ import annotations

from chainlang.diagnostics import Rule

# -- loading (YAML) --
YAML_SYNTAX = Rule("CL001", "yaml-syntax", "error", "The file is not valid YAML")
DUPLICATE_KEY = Rule("CL002", "duplicate-key", "error", "A mapping has the same key twice")
FORBIDDEN_TAG = Rule("CL003", "forbidden-tag", "error", "A YAML tag outside the core schema")
YAML_LIMIT = Rule("CL004", "yaml-limit", "error", "The file exceeds a size, depth or alias-expansion bound")
NOT_A_CHAIN = Rule("CL005", "not-a-chain", "error", "The document is empty or has no steps")

# -- structure --
UNKNOWN_KEY = Rule("CL010", "unknown-key", "error", "A key that the language does not define")
WRONG_TYPE = Rule("CL011", "wrong-type", "error", "A value of the wrong YAML type")
UNQUOTED_TEMPLATE = Rule("CL012", "unquoted-template", "error", "A template written without quotes, read by YAML as a mapping")
EVENT_NAME = Rule("CL013", "event-name", "error", "An event name not of the dotted lowercase form")
UNKNOWN_EVENT = Rule("CL014", "unknown-event", "error", "An event that no tool, chain or declaration provides")
PARAM_SCHEMA = Rule("CL015", "param-schema", "error", "A literal param that its event's schema rejects")
MISSING_PARAM = Rule("CL016", "missing-param", "warning", "A required param is missing (the decide model will be asked)")
INVALID_ID = Rule("CL017", "invalid-id", "error", "A step id not of the form [a-z][a-z0-9_]*, or reserved")
DUPLICATE_ID = Rule("CL018", "duplicate-id", "error", "Two steps or hooks share an id")
BAD_DURATION = Rule("CL019", "bad-duration", "error", "A duration that does not parse")

# -- expressions and references --
EXPR_SYNTAX = Rule("CL020", "expr-syntax", "error", "An expression or template that does not parse")
REF_UNKNOWN = Rule("CL021", "ref-unknown", "error", "A reference whose root names nothing")
REF_INPUT = Rule("CL022", "ref-input", "error", "A reference to an input the chain does not declare")
REF_FORWARD = Rule("CL023", "ref-forward", "error", "A reference to a step that only runs later")
REF_SIBLING = Rule("CL024", "ref-sibling", "error", "A reference to a sibling in the same parallel group")
REF_INDEX = Rule("CL025", "ref-index", "error", "An occurrence index out of range")
REF_PATH = Rule("CL026", "ref-path", "error", "A path absent from the declared result schema")
TYPE_MISMATCH = Rule("CL027", "type-mismatch", "error", "Operands whose types cannot work together")
FILTER = Rule("CL028", "filter", "error", "An unknown filter or wrong filter arguments")
BAD_REGEX = Rule("CL029", "bad-regex", "error", "A regular expression that does not compile")

# -- limits and options --
BAD_LIMIT = Rule("CL030", "bad-limit", "error", "A limit that is not a positive whole number in range")
EMPTY_RETRY = Rule("CL031", "empty-retry", "error", "A retry that would not retry")
BAD_ALLOW = Rule("CL032", "bad-allow", "error", "An allow pattern that is not an event name or glob")
BAD_SCHEMA = Rule("CL033", "bad-schema", "error", "An input, event payload or model.ask schema that is not a valid JSON Schema")
BAD_VERSION = Rule("CL034", "bad-version", "error", "An unsupported `chainlang` version")
NOT_ALLOWED = Rule("CL035", "not-allowed", "error", "A step calls an event that the chain's allow list forbids")
OVER_BUDGET = Rule("CL036", "over-budget", "error", "The chain's worst case makes more model calls than its max_model_calls")
NO_MODEL = Rule("CL037", "no-model", "warning", "A step needs a model and the project configures none")
NOT_ON_ENGINE = Rule("CL038", "not-on-engine", "error", "The chain cannot run on the project's engine as it is written")
REF_SECRET = Rule("CL039", "ref-secret", "error", "A secrets.NAME reference to a secret that chainlang.toml does not declare")

# -- hooks and chains --
HOOK_TRIGGER = Rule("CL040", "hook-trigger", "error", "A hook trigger not of the form pre:NAME, post:NAME or error:NAME")
HOOK_UNKNOWN_EVENT = Rule("CL041", "hook-unknown-event", "error", "A trigger on an event that is neither a tool nor declared")
HOOK_AFTER_UNKNOWN = Rule("CL042", "hook-after-unknown", "error", "An `after` naming a hook id that does not exist")
HOOK_AFTER_CYCLE = Rule("CL043", "hook-after-cycle", "error", "Hooks whose `after` lists form a cycle")
HOOK_RECURSION = Rule("CL044", "hook-recursion", "error", "A hook whose action can re-trigger itself without max_depth")
CHAIN_CYCLE = Rule("CL045", "chain-cycle", "error", "Chains that call each other in a cycle")
HOOK_ACTION = Rule("CL046", "hook-action", "error", "A hook with no action, set or cancel, or with options that do not fit its trigger")

# -- control flow: repeat (CL050-CL052) --
REPEAT_MAX = Rule("CL050", "repeat-max", "error", "A repeat without max, or with a max out of range")
REPEAT_BUDGET = Rule("CL051", "repeat-budget", "error", "A repeat whose worst case (max passes of its body) exceeds limits.max_steps")
LOOP_REF = Rule("CL052", "loop-ref", "error", "A loop.NAME that the repeat's state does not declare, or loop outside a repeat")

# -- control flow: try/catch/finally, fail, switch (CL053-CL055) --
FLOW_SHAPE = Rule("CL053", "flow-shape", "error", "A try, switch or fail step written wrongly: catch/finally without try, an empty try, a switch without cases")
SWITCH_CASE_NEVER = Rule("CL054", "switch-case-never", "error", "A switch case that cannot match: the value is an enum without it")
SWITCH_UNCOVERED = Rule("CL055", "switch-uncovered", "warning", "A switch on an enum with a value that no case covers and no default")

# -- retry by error type (CL056-CL057) --
BAD_RETRY_ON = Rule("CL056", "bad-retry-on", "error", "A `retry.on` that is not a non-empty list of error types")
RETRY_ON_NEVER = Rule("CL057", "retry-on-never", "warning", "A `retry.on` type that is never retried, or looks misspelt")

# -- error: hook triggers (CL058-CL059) --
ERROR_HOOK_NEVER_FIRES = Rule("CL058", "error-hook-never-fires", "error", "An error: hook on events that cannot fail (external events have no tool)")

# -- triggers in chain files (CL060-CL063) --
TRIGGER_CRON = Rule("CL060", "trigger-cron", "error", "A cron trigger that does not parse, never fires, or names an unknown time zone")
TRIGGER_EVENT = Rule("CL061", "trigger-event", "error", "An event trigger on an event that is neither declared nor a tool")
TRIGGER_INPUTS = Rule("CL062", "trigger-inputs", "error", "A trigger whose inputs or payload cannot fill the chain's inputs")
BAD_TRIGGER = Rule("CL063", "bad-trigger", "error", "A trigger that is not one cron or one event, or has options that do not fit it")

# -- computed indexes (CL064-CL065) --

# -- secrets kept out of prompts (CL066-CL067) --
SECRET_FLOW = Rule("CL066", "secret-flow", "error", "A secret flows into a model prompt or user.notify without expose")
BAD_EXPOSE = Rule("CL067", "bad-expose", "error", "An expose naming no declared secret (an error), or one no flow needs (a warning)")

# -- waiting inside a run (CL068-CL070) --
WAIT_SHAPE = Rule("CL068", "wait-shape", "error", "A wait or user.ask step written wrongly: no event, an event that is not external, a bad on_timeout")
WAIT_NO_TIMEOUT = Rule("CL069", "wait-no-timeout", "warning", "A wait without a timeout: the run may wait forever")
WAIT_WHERE = Rule("CL070", "wait-where", "error", "A wait's where that reads nothing of its event's payload, or compares a field with a value it cannot have")

ALL_RULES: tuple[Rule, ...] = tuple(
    value for value in list(globals().values()) if isinstance(value, Rule)
)
RULES_BY_ID: dict[str, Rule] = {rule.id: rule for rule in ALL_RULES}
RULES_BY_SLUG: dict[str, Rule] = {rule.slug: rule for rule in ALL_RULES}

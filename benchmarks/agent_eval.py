"""Evaluation of the agent events on a real small model (issue 25, deliverable 6).

Not a test: it prints rates and figures and never fails on them. It serves SmolLM2-135M-Instruct
with llama.cpp on loopback (tests/llm/serve_model.py, behind the counting proxy of
tests/llm/llm_util.py), writes a project under a scratch directory whose `[models.fast]` and
`[models.light]` name that server, and runs, through the CLI:

  - plans (agent_eval/plans.yaml): a one-step chain `agent.chain: {plan: ...}` per plan, over
    the deterministic tools of agent_eval/tools.py and tools.now. Scored: valid (the checker
    accepted the chain: on the first try, and after at most --max-repairs repairs) and exact
    (the accepted chain's events, flattened in order, equal the plan's expected sequence);
  - decisions (agent_eval/decisions.yaml): one step each, with a plain-language `decide:`
    condition over valid params, or params only a model can repair; scored against the
    labelled action, with the count of right `continue` decisions whose step still failed
    ("a correct decision turned into a failure").

The source tree under test is --source (default: the first entry of $PYTHONPATH that holds a
chainlang package, else this checkout): the CLI runs with it first on PYTHONPATH, so the same
harness measures an old worktree ("before") and the current code ("after").

Usage:
  python benchmarks/agent_eval.py [--source DIR] [--threads 1] [--max-repairs 2]
                                  [--plans N] [--decisions N] [--out FILE] [--compare OLD.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

HERE = Path(__file__).resolve().parent
DATA = HERE / "agent_eval"
REPO = HERE.parent
# the model server and the proxy come from this checkout, whatever tree is measured
sys.path[:0] = [str(REPO / "tests" / "llm"), str(REPO)]
from llm_util import Call, ModelServer, Proxy  # type: ignore[import-not-found]  # noqa: E402

MODEL = "smollm2-135m-instruct"
STDLIB_ALLOWED = ["tools.now"]
RUN_TIMEOUT = 1800.0  # seconds for one chainlang run (a plan with its repairs, on a busy core)
_NOT_INHERITED = ("NO_COLOR", "FORCE_COLOR", "CLICOLOR", "CLICOLOR_FORCE", "CHAINLANG_DEBUG", "TERM",
                  "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")
# step keys whose values are not steps (params, conditions, settings)
_NOT_STEPS = {"params", "decide", "on_error", "outputs", "inputs", "id", "as", "if", "when", "in", "retry",
              "timeout", "allow", "limits", "max_parallel", "description", "condition", "with"}


# -- the data -------------------------------------------------------------------------------


def load_plans() -> list[dict[str, Any]]:
    return list(YAML(typ="safe").load((DATA / "plans.yaml").read_text("utf-8"))["plans"])


def load_decisions() -> list[dict[str, Any]]:
    return list(YAML(typ="safe").load((DATA / "decisions.yaml").read_text("utf-8"))["decisions"])


def tool_names() -> list[str]:
    """The events tools.py declares (read from its text: the harness never imports chainlang)."""
    import re

    return re.findall(r'@event\("([a-z_.]+)"', (DATA / "tools.py").read_text("utf-8"))


# -- the source tree and the CLI --------------------------------------------------------------


def default_source() -> Path:
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if entry and (Path(entry) / "chainlang" / "__init__.py").is_file():
            return Path(entry).resolve()
    return REPO


def cli_env(source: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
    env.update(NO_COLOR="1", PYTHONIOENCODING="utf-8", PYTHONPATH=str(source))
    return env


def describe_source(source: Path) -> dict[str, Any]:
    """The git state of the tree, and whether the CLI imports chainlang from it (no paths of
    this machine: result files are kept in the repository)."""
    imported = subprocess.run([sys.executable, "-c", "import chainlang; print(chainlang.__file__)"],
                              env=cli_env(source), capture_output=True, text=True, check=False).stdout.strip()

    def git(*args: str) -> str:
        proc = subprocess.run(["git", "-C", str(source), *args], capture_output=True, text=True, check=False)
        return proc.stdout.strip() if proc.returncode == 0 else ""

    changed = git("status", "--porcelain", "--untracked-files=no")
    return {"path": "this checkout" if source == REPO else source.name,
            "imports_source": bool(imported) and Path(imported).resolve().is_relative_to(source),
            "commit": git("rev-parse", "HEAD"), "changed_files": len(changed.splitlines()) if changed else 0}


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str
    records: list[dict[str, Any]]
    seconds: float

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.stdout + self.stderr

    @property
    def finished(self) -> bool:
        return bool(self.records) and self.records[-1].get("type") == "run_finished"


def run_chain(project: Path, chain: Path, source: Path, inputs: dict[str, str] | None = None) -> Ran:
    transcript = chain.with_suffix(".jsonl")
    transcript.unlink(missing_ok=True)
    args = [sys.executable, "-m", "chainlang", "run", chain.name, "--transcript", transcript.name, "--json",
            "--progress", "plain"]
    for key, value in (inputs or {}).items():
        args += ["--input", f"{key}={value}"]
    started = time.monotonic()
    try:
        proc = subprocess.run(args, cwd=project, env=cli_env(source), stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, encoding="utf-8", timeout=RUN_TIMEOUT, check=False)
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired:
        code, out, err = -1, "", f"chainlang run did not end within {RUN_TIMEOUT:.0f}s"
    records = []
    if transcript.is_file():
        for line in transcript.read_text("utf-8").splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                pass
    return Ran(code, out, err, records, time.monotonic() - started)


def write_project(project: Path, base_url: str, timeout: str = "600s", max_tokens: int = 256) -> None:
    project.mkdir(parents=True, exist_ok=True)
    (project / "tools.py").write_text((DATA / "tools.py").read_text("utf-8"), encoding="utf-8")
    toml = (DATA / "chainlang.toml").read_text("utf-8")
    for key, value in (("base_url", base_url), ("model", MODEL), ("timeout", timeout), ("max_tokens", str(max_tokens))):
        toml = toml.replace("{" + key + "}", value)
    (project / "chainlang.toml").write_text(toml, encoding="utf-8")


def allow_list() -> list[str]:
    return sorted(tool_names() + STDLIB_ALLOWED)


# -- plans ----------------------------------------------------------------------------------


def flatten(steps: Any) -> list[str]:
    """The event names of a chain's steps, in order, blocks opened (`parallel`, `foreach`...):
    a step is `"event.name"`, `{"event.name": params}` or `{"event": "event.name", ...}`."""
    found: list[str] = []

    def walk(item: Any, in_list: bool) -> None:
        if isinstance(item, str):
            if in_list:
                found.append(item)
        elif isinstance(item, list):
            for each in item:
                walk(each, True)
        elif isinstance(item, dict):
            if isinstance(item.get("event"), str):
                found.append(item["event"])
                return
            for key, value in item.items():
                if "." in str(key):
                    found.append(str(key))
                elif key not in _NOT_STEPS and isinstance(value, (list, dict)):
                    walk(value, False)

    walk(steps, True)
    return found


@dataclass
class PlanResult:
    id: str
    plan: str
    expect: list[str]
    outcome: str  # ran | ran-failed | refused | cut | model-error | no-model-call | error
    valid: bool = False
    valid_first_try: bool = False
    exact: bool = False
    repairs: int = 0
    requests: int = 0  # model_call records of the agent.chain step (the first try and its repairs)
    recorded: int = 0  # model_call records of the whole run (with those of a nested agent.chain it wrote)
    asked: int = 0  # chat requests that reached the server during this run (the proxy's count)
    events: list[str] = field(default_factory=list)
    chain: Any = None
    message: str = ""
    traceback: bool = False
    finished: bool = False  # the transcript ends with run_finished (the run ended, however)
    seconds: float = 0.0


def model_calls(records: list[dict[str, Any]], step: str = "1") -> list[dict[str, Any]]:
    return [r for r in records if r.get("type") == "model_call" and r.get("step") == step]


def step_end(records: list[dict[str, Any]], step: str = "1") -> dict[str, Any] | None:
    ends = [r for r in records if r.get("type") == "step_finished" and r.get("step") == step]
    return ends[-1] if ends else None


def last_answer_chain(calls: list[dict[str, Any]]) -> Any:
    """The `chain` of the last recorded answer (what the checker judged last), or None when
    that answer is not JSON."""
    if not calls:
        return None
    try:
        answer = json.loads(calls[-1].get("answer") or "")
    except (TypeError, ValueError):
        return None
    return answer.get("chain") if isinstance(answer, dict) else answer


def score_plan(case: dict[str, Any], ran: Ran) -> PlanResult:
    calls = model_calls(ran.records)
    end = step_end(ran.records)
    result = PlanResult(case["id"], case["plan"], list(case["expect"]), "error", requests=len(calls),
                        recorded=sum(1 for r in ran.records if r.get("type") == "model_call"), traceback=ran.traceback, finished=ran.finished, seconds=round(ran.seconds, 2))
    error = ((end or {}).get("error") or {}).get("message", "") if end else ran.stderr.strip()[-400:]
    result.message = error[:400]
    if end is not None and end.get("status") == "ok" and isinstance(end.get("result"), dict):
        result.outcome, result.valid, result.chain = "ran", True, end["result"].get("chain")
        result.repairs = int(end["result"].get("repairs", len(calls) - 1))
    elif "wrote failed" in error:  # accepted by the checker, then a step of it failed
        result.outcome, result.valid, result.chain = "ran-failed", True, last_answer_chain(calls)
        result.repairs = max(0, len(calls) - 1)
    elif "refused by the checker" in error:
        result.outcome, result.chain, result.repairs = "refused", last_answer_chain(calls), max(0, len(calls) - 1)
    elif "was cut" in error or (calls and calls[-1].get("finish_reason") == "length"):
        result.outcome, result.chain, result.repairs = "cut", last_answer_chain(calls), max(0, len(calls) - 1)
    elif not calls:
        result.outcome = "no-model-call"
    elif any(c.get("error") for c in calls):
        result.outcome = "model-error"
    result.valid_first_try = result.valid and result.repairs == 0
    result.events = flatten(result.chain) if result.chain is not None else []
    result.exact = result.valid and result.events == result.expect
    return result


def asked_since(proxy: Proxy | None, first: int) -> int:
    """The chat requests the proxy passed on since its call number `first`."""
    if proxy is None:
        return 0
    proxy.wait_idle()
    return sum(1 for c in proxy.calls[first:] if c.path.endswith("/chat/completions"))


def run_plans(project: Path, source: Path, plans: list[dict[str, Any]], max_repairs: int,
              echo: bool = True, open_allow: bool = False, proxy: Proxy | None = None) -> list[PlanResult]:
    """Each plan as a chain of one agent.chain step; its `allow` is the tools (what the prompt
    lists), or none with `open_allow` (every event: a plain project's prompt)."""
    allowed = allow_list() + ["agent.chain"]
    results = []
    for n, case in enumerate(plans, 1):
        chain = project / f"{case['id']}.chain.yaml"
        doc: dict[str, Any] = {} if open_allow else {"allow": allowed}
        doc["steps"] = [{"agent.chain": {"plan": case["plan"], "max_repairs": max_repairs}}]
        chain.write_text(json.dumps(doc, indent=1), encoding="utf-8")  # JSON is YAML
        first = len(proxy.calls) if proxy else 0
        result = score_plan(case, run_chain(project, chain, source))
        result.asked = asked_since(proxy, first)
        results.append(result)
        if echo:
            print(f"[plan {n}/{len(plans)}] {case['id']} {result.outcome}, repairs {result.repairs}, "
                  f"{'EXACT' if result.exact else 'inexact'}: {result.events} (expected {result.expect}); "
                  f"{result.seconds:.1f}s{'; TRACEBACK' if result.traceback else ''}", flush=True)
    return results


# -- decisions ------------------------------------------------------------------------------


@dataclass
class DecisionResult:
    id: str
    kind: str
    expect: str
    action: str = ""  # the decision's action, or "" when no decision was recorded
    source: str = ""
    status: str = ""  # the step's status
    right: bool = False  # the labelled action, and for continue a step that then ran
    # a condition's right `continue` over valid params, and the step failed anyway (the issue's
    # target is none; a repair's continue whose params are still invalid is merely wrong)
    correct_turned_failure: bool = False
    requests: int = 0  # model_call records of the step
    asked: int = 0  # chat requests that reached the server during this run
    message: str = ""
    traceback: bool = False
    finished: bool = False
    seconds: float = 0.0


def score_decision(case: dict[str, Any], ran: Ran) -> DecisionResult:
    result = DecisionResult(case["id"], case["kind"], case["expect"], requests=len(model_calls(ran.records)),
                            traceback=ran.traceback, finished=ran.finished, seconds=round(ran.seconds, 2))
    decided = [r for r in ran.records if r.get("type") == "decide" and r.get("step") == "1"]
    end = step_end(ran.records)
    if decided:
        result.action, result.source = str(decided[-1].get("action", "")), str(decided[-1].get("source", ""))
    if end is not None:
        result.status = str(end.get("status", ""))
        result.message = str((end.get("error") or {}).get("message", ""))[:400]
    else:
        result.message = ran.stderr.strip()[-400:]
    if result.action == case["expect"]:
        result.right = case["expect"] != "continue" or result.status == "ok"
        result.correct_turned_failure = (case["kind"] == "condition" and case["expect"] == "continue"
                                         and result.status == "failed")
    return result


def run_decisions(project: Path, source: Path, cases: list[dict[str, Any]], echo: bool = True,
                  proxy: Proxy | None = None) -> list[DecisionResult]:
    results = []
    for n, case in enumerate(cases, 1):
        step = dict(case["step"])
        if case.get("decide"):
            step["decide"] = case["decide"]
        doc: dict[str, Any] = {"allow": allow_list(), "steps": [step]}
        if case.get("inputs"):
            doc["inputs"] = {key: {"type": "string"} for key in case["inputs"]}
        chain = project / f"{case['id']}.chain.yaml"
        chain.write_text(json.dumps(doc, indent=1), encoding="utf-8")
        first = len(proxy.calls) if proxy else 0
        result = score_decision(case, run_chain(project, chain, source, case.get("inputs")))
        result.asked = asked_since(proxy, first)
        results.append(result)
        if echo:
            print(f"[decision {n}/{len(cases)}] {case['id']} ({case['kind']}) expected {case['expect']}, got "
                  f"{result.action or 'none'} from {result.source or '-'}, step {result.status or '-'}: "
                  f"{'RIGHT' if result.right else 'wrong'}"
                  f"{' (correct turned failure)' if result.correct_turned_failure else ''}; {result.seconds:.1f}s",
                  flush=True)
    return results


# -- figures --------------------------------------------------------------------------------


def rate(hits: int, total: int) -> dict[str, Any]:
    return {"hits": hits, "total": total, "rate": round(hits / total, 3) if total else None}


def rates(plans: list[PlanResult], decisions: list[DecisionResult]) -> dict[str, Any]:
    conditions = [d for d in decisions if d.kind == "condition"]
    return {
        "valid_first_try": rate(sum(p.valid_first_try for p in plans), len(plans)),
        "valid_after_repairs": rate(sum(p.valid for p in plans), len(plans)),
        "exact": rate(sum(p.exact for p in plans), len(plans)),
        "decisions_right": rate(sum(d.right for d in decisions), len(decisions)),
        "conditions_right": rate(sum(d.right for d in conditions), len(conditions)),
        "repairs_right": rate(sum(d.right for d in decisions if d.kind == "repair"),
                              sum(d.kind == "repair" for d in decisions)),
        "correct_turned_failure": sum(d.correct_turned_failure for d in decisions),
        "tracebacks": sum(p.traceback for p in plans) + sum(d.traceback for d in decisions),
    }


def request_figures(calls: list[Call]) -> dict[str, Any]:
    """Per chat request that got an answer: time and prompt tokens, in all and by kind."""
    chat = [c for c in calls if c.path.endswith("/chat/completions") and c.status == 200]

    def stats(group: list[Call]) -> dict[str, Any]:
        seconds = [c.seconds for c in group]
        prompt = [c.tokens[0] for c in group]
        answer = [c.tokens[1] for c in group]
        return {"count": len(group),
                "seconds_median": round(statistics.median(seconds), 2) if group else None,
                "seconds_max": round(max(seconds), 2) if group else None,
                "seconds_total": round(sum(seconds), 1),
                "prompt_tokens_median": statistics.median(prompt) if group else None,
                "prompt_tokens_max": max(prompt) if group else None,
                "answer_tokens_median": statistics.median(answer) if group else None,
                "cut_at_max_tokens": sum(1 for c in group if _finish_reason(c) == "length")}

    kinds = sorted({c.kind for c in chat})
    return {"all": stats(chat), **{kind: stats([c for c in chat if c.kind == kind]) for kind in kinds},
            "failed_requests": sum(1 for c in calls if c.path.endswith("/chat/completions") and c.status != 200)}


def _finish_reason(call: Call) -> str:
    try:
        return str(call.answer["choices"][0].get("finish_reason") or "")
    except (TypeError, KeyError, IndexError, AttributeError):
        return ""


def process_cpu_seconds(pid: int) -> float | None:
    """user + system CPU time of a live process (Linux /proc), or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def show(result: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    lines = []

    def fmt(value: Any) -> str:
        if isinstance(value, dict):
            return f"{value['hits']}/{value['total']} ({value['rate'] * 100:.0f} %)" if value["total"] else "-"
        return str(value)

    labels = [("valid_first_try", "valid chains, first try"), ("valid_after_repairs", "valid chains, after repairs"),
              ("exact", "exact event sequences"), ("decisions_right", "decisions right"),
              ("conditions_right", "  conditions right"), ("repairs_right", "  repairs right"),
              ("correct_turned_failure", "correct decision turned into a failure"),
              ("tracebacks", "tracebacks")]
    meta = result["meta"]
    lines.append(f"source {meta['source']['path']} (commit {meta['source']['commit'][:10] or '?'}, "
                 f"{meta['source']['changed_files']} changed files); llama.cpp threads {meta['threads']}, "
                 f"ctx {meta['ctx']}, max_repairs {meta['max_repairs']}")
    header = f"{'':40} {'this run':>16}" + (f" {'compared':>16}" if old else "")
    lines.append(header)
    for key, label in labels:
        line = f"{label:40} {fmt(result['rates'][key]):>16}"
        if old:
            line += f" {fmt(old.get('rates', {}).get(key, '-')):>16}"
        lines.append(line)
    for name, res in (("this run", result), ("compared", old)):
        if not res:
            continue
        req = res["requests"]["all"]
        m = res["meta"]
        lines.append(f"{name}: {req['count']} requests, time median {req['seconds_median']} s / max "
                     f"{req['seconds_max']} s; prompt tokens median {req['prompt_tokens_median']} / max "
                     f"{req['prompt_tokens_max']}; cut at max_tokens {req['cut_at_max_tokens']}; wall "
                     f"{m['wall_seconds']:.0f} s, CPU server {m['cpu_seconds']['server']} s + CLI "
                     f"{m['cpu_seconds']['cli']} s; load {m['load_before']} -> {m['load_after']}")
        for kind, figures in res["requests"].items():
            if kind in ("all", "failed_requests"):
                continue
            lines.append(f"  [{kind}] {figures['count']} requests, median {figures['seconds_median']} s, "
                         f"prompt tokens median {figures['prompt_tokens_median']} / max {figures['prompt_tokens_max']}")
    return lines


def markdown_table(results: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """The figures of result documents side by side, as the real-model guide shows them."""
    def pct(value: Any) -> str:
        if not isinstance(value, dict) or not value.get("total"):
            return "-"
        return f"{value['hits']}/{value['total']} ({value['rate'] * 100:.0f} %)"

    def req(res: dict[str, Any], kind: str, key: str, unit: str = "") -> str:
        figures = res["requests"].get(kind) or {}
        value = figures.get(key)
        return "-" if value is None else f"{value:,}{unit}" if isinstance(value, int) else f"{value:g}{unit}"

    rows: list[tuple[str, Any]] = [
        ("source", lambda r: f"`{r['meta']['source']['commit'][:7]}`"
                             + (f" + {r['meta']['source']['changed_files']} changed files"
                                if r["meta"]["source"]["changed_files"] else "")),
        ("max_repairs", lambda r: str(r["meta"]["max_repairs"])),
        ("valid chains, first try", lambda r: pct(r["rates"]["valid_first_try"])),
        ("valid chains, after repairs", lambda r: pct(r["rates"]["valid_after_repairs"])),
        ("exact event sequences", lambda r: pct(r["rates"]["exact"])),
        ("decisions right", lambda r: pct(r["rates"]["decisions_right"])),
        ("conditions right", lambda r: pct(r["rates"]["conditions_right"])),
        ("repairs right", lambda r: pct(r["rates"]["repairs_right"])),
        ("correct decision turned into a failure", lambda r: str(r["rates"]["correct_turned_failure"])),
        ("chain request: prompt tokens, median / max",
         lambda r: f"{req(r, 'chain', 'prompt_tokens_median')} / {req(r, 'chain', 'prompt_tokens_max')}"),
        ("chain request: time, median / max",
         lambda r: f"{req(r, 'chain', 'seconds_median', ' s')} / {req(r, 'chain', 'seconds_max', ' s')}"),
        ("decision request: prompt tokens, median / max",
         lambda r: f"{req(r, 'decision', 'prompt_tokens_median')} / {req(r, 'decision', 'prompt_tokens_max')}"),
        ("all requests: count; time median / max",
         lambda r: f"{req(r, 'all', 'count')}; {req(r, 'all', 'seconds_median', ' s')} / "
                   f"{req(r, 'all', 'seconds_max', ' s')}"),
        ("answers cut at max_tokens", lambda r: req(r, "all", "cut_at_max_tokens")),
        ("wall time; CPU server + runs", lambda r: f"{r['meta']['wall_seconds'] / 60:.0f} min; "
                                                   f"{r['meta']['cpu_seconds']['server']:.0f} s + "
                                                   f"{r['meta']['cpu_seconds']['cli']:.0f} s"),
        ("load average (1 min) before / after",
         lambda r: f"{r['meta']['load_before'][0]} / {r['meta']['load_after'][0]}"),
    ]
    lines = ["| | " + " | ".join(name for name, _ in results) + " |", "|---|" + "---|" * len(results)]
    for label, cell in rows:
        lines.append(f"| {label} | " + " | ".join(cell(res) for _, res in results) + " |")
    return lines


# -- the whole run --------------------------------------------------------------------------


def evaluate(proxy: Proxy, project: Path, source: Path, plans: list[dict[str, Any]],
             decisions: list[dict[str, Any]], max_repairs: int, echo: bool = True,
             open_allow: bool = False) -> dict[str, Any]:
    """Runs the plans and the decisions against the model behind `proxy`; the result document
    (without the server's meta data, which `main` adds)."""
    write_project(project, proxy.url)
    first = len(proxy.calls)
    plan_results = run_plans(project, source, plans, max_repairs, echo, open_allow, proxy)
    decision_results = run_decisions(project, source, decisions, echo, proxy)
    proxy.wait_idle()
    calls = proxy.calls[first:]
    cases = [asdict(p) for p in plan_results], [asdict(d) for d in decision_results]
    for case in cases[0] + cases[1]:  # the scratch directory's path is this machine's
        case["message"] = case["message"].replace(str(project.resolve()), "<project>").replace(str(project), "<project>")
    return {"rates": rates(plan_results, decision_results), "requests": request_figures(calls),
            "plans": cases[0], "decisions": cases[1]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=None, help="the source tree to measure (default: see above)")
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads (default 1)")
    parser.add_argument("--ctx", type=int, default=4096, help="the server's context window (default 4096)")
    parser.add_argument("--max-repairs", type=int, default=2, help="agent.chain's max_repairs (default 2)")
    parser.add_argument("--plans", type=int, default=None, help="only the first N plans")
    parser.add_argument("--decisions", type=int, default=None, help="only the first N decisions")
    parser.add_argument("--out", type=Path, default=None, help="write the result document (JSON) here")
    parser.add_argument("--compare", type=Path, default=None, help="an earlier result document to show beside")
    parser.add_argument("--work", type=Path, default=None, help="scratch directory (default: a new temporary one)")
    parser.add_argument("--open", action="store_true",
                        help="plans without an allow list: agent.chain's prompt lists every event (a plain project)")
    parser.add_argument("--quiet", action="store_true", help="no line per request and per case")
    parser.add_argument("--table", type=Path, nargs="+", metavar="RESULT.json",
                        help="print these result documents as a Markdown table, and run nothing")
    args = parser.parse_args()
    if args.table:
        print("\n".join(markdown_table([(path.stem, json.loads(path.read_text("utf-8"))) for path in args.table])))
        return 0

    source = (args.source or default_source()).resolve()
    old = json.loads(args.compare.read_text("utf-8")) if args.compare else None
    work = args.work or Path(tempfile.mkdtemp(prefix="agent-eval-"))
    work.mkdir(parents=True, exist_ok=True)
    plans = load_plans()[:args.plans]
    decisions = load_decisions()[:args.decisions]
    meta: dict[str, Any] = {"source": describe_source(source), "threads": args.threads, "ctx": args.ctx,
                            "max_repairs": args.max_repairs, "open": args.open, "model": MODEL, "plans": len(plans),
                            "decisions": len(decisions),
                            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                            "load_before": [round(x, 2) for x in os.getloadavg()]}
    if not meta["source"]["imports_source"]:
        print(f"the CLI does not import chainlang from {source}: is it a chainlang source tree?", file=sys.stderr)
        return 2
    print(f"measuring {source} (commit {meta['source']['commit'][:10]}): {len(plans)} plans, "
          f"{len(decisions)} decisions, max_repairs {args.max_repairs}, {args.threads} llama.cpp thread(s); "
          f"scratch {work}", flush=True)
    server = ModelServer(work / "server.log", args.threads, extra_args=["--ctx", str(args.ctx)])
    server.start()
    proxy = Proxy(server.url, verbose=not args.quiet)
    proxy.start()
    started, cli_cpu = time.monotonic(), _children_cpu()
    server_cpu = process_cpu_seconds(server.proc.pid) if server.proc else None
    try:
        result = evaluate(proxy, work / "project", source, plans, decisions, args.max_repairs, echo=not args.quiet,
                          open_allow=args.open)
        server_after = process_cpu_seconds(server.proc.pid) if server.proc else None
        cli_after = _children_cpu()  # before the server is reaped (its time would count too)
    finally:
        proxy.stop()
        server.stop()
    meta.update(wall_seconds=round(time.monotonic() - started, 1),
                finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                load_after=[round(x, 2) for x in os.getloadavg()],
                cpu_seconds={"server": round(server_after - server_cpu, 1)
                             if server_after is not None and server_cpu is not None else None,
                             "cli": round(cli_after - cli_cpu, 1)})
    result = {"meta": meta, **result}
    print("\n" + "\n".join(show(result, old)))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")
    return 0


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    sys.exit(main())

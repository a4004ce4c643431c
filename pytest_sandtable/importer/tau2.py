"""``python -m pytest_sandtable import tau2 PATH -o DIR``: a τ²-bench domain
(``data/tau2/domains/airline`` or ``.../retail``) as a sandtable domain. Telecom (dual
control: the caller's phone, its tools, the sync) is :mod:`.tau2_telecom`'s, which
:func:`import_tau2` hands it to.

τ²'s files are read as data, never run: ``db.json``, ``tasks.json``,
``split_tasks.json`` and ``policy.md`` from the domain's data folder, and the tools'
schemas from its toolkit's source (``src/tau2/domains/<name>/tools.py``: every method
of the toolkit class decorated ``@is_tool``, its parameters' annotations and its
docstring's ``Args:``; the pydantic models and ``Literal`` aliases the annotations name
from ``data_model.py``), read with :mod:`ast`. What the tools *do* is in the handler
modules shipped here (``templates/tau2_<name>_handlers.py``), copied next to the
domain file.

Tasks keep τ²'s reward basis: ``DB`` becomes ``world_matches_reference`` (the final
world equals the one τ²'s gold ``actions`` make), ``COMMUNICATE`` becomes
``reply_includes`` of its ``communicate_info``. What the project cannot grade yet is
kept as the task's ``judge:`` criteria (judged soft scores, never counted): ``nl_assertions``
(they need an LLM judge) and ``communicate_info`` of a task whose basis does not name
``COMMUNICATE`` (τ² records those checks and does not count them). docs/import.md.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .tau_bench import _block, _name, _param, _q, _typed, check_out, write_import

__all__ = [
    "DOMAINS",
    "SPLITS",
    "Tau2Domain",
    "Tau2ImportError",
    "Tau2Task",
    "import_tau2",
    "read_domain",
    "task_id",
]

TEMPLATES = Path(__file__).resolve().parent / "templates"
DOMAIN_FILE = "sandtable.yaml"
TAU2_NOW = "2024-05-15T15:00:00-05:00"  # both policies: "The current time is 2024-05-15 15:00:00 EST"
OPENING_LINE = "Hi, I need some help."
SPLITS = ("base", "train", "test", "small")
DEFAULT_SPLIT = "base"  # τ²'s get_tasks() default, the split its leaderboard reports
# the reward bases τ² has, and the ones this import grades
BASES = ("DB", "ENV_ASSERTION", "ACTION", "COMMUNICATE", "NL_ASSERTION")
GRADED = ("DB", "COMMUNICATE")


@dataclass(frozen=True)
class Shape:
    """One τ² domain: its tables (db.json key -> key field), its toolkit class."""

    tables: Mapping[str, str]
    toolkit: str
    written_fields: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


DOMAINS: Mapping[str, Shape] = {
    "airline": Shape(
        tables={"flights": "flight_number", "users": "user_id", "reservations": "reservation_id"},
        toolkit="AirlineTools",
        written_fields={"reservations": ("status",)},
    ),
    "retail": Shape(
        tables={"products": "product_id", "users": "user_id", "orders": "order_id"},
        toolkit="RetailTools",
        written_fields={
            "orders": (
                "cancel_reason",
                "exchange_items",
                "exchange_new_items",
                "exchange_payment_method_id",
                "exchange_price_difference",
                "return_items",
                "return_payment_method_id",
            )
        },
    ),
}
# what waits for the user's side of the world (docs/import.md)
LATER = {
    "banking_knowledge": "its agent unlocks hidden tools and searches a knowledge base, which sandtable "
    "domains cannot say yet",
}


class Tau2ImportError(Exception):
    """Why an import cannot be done: the message the command prints after ``error:``."""


@dataclass
class Tau2Task:
    id: str
    instructions: str
    actions: list[tuple[str, dict[str, Any]]]
    reward_basis: list[str]
    communicate_info: list[str]
    nl_assertions: list[str]
    purpose: str | None = None


@dataclass
class Tau2Domain:
    name: str
    path: Path
    split: str
    tools: list[dict[str, Any]]  # each {"name", "description", "parameters": JSON Schema}
    tasks: list[Tau2Task]
    data: dict[str, dict[str, dict[str, Any]]]
    policy: str


def task_id(domain: str, raw: str) -> str:
    """A τ² task id as a sandtable one: ``airline-007`` for τ²'s ``"7"``."""
    return f"{domain}-{raw.zfill(3)}" if raw.isdigit() else f"{domain}-{raw}"


# -- reading ---------------------------------------------------------------------------


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise Tau2ImportError(f"{path}: cannot read: {e}") from None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(_read_text(path))
    except json.JSONDecodeError as e:
        raise Tau2ImportError(f"{path}:{e.lineno}: not valid JSON: {e.msg}") from None


def source_folder(path: Path) -> Path:
    """Where the toolkit of the domain at ``path`` (``<root>/data/tau2/domains/<name>``)
    is: ``<root>/src/tau2/domains/<name>``."""
    resolved = path.resolve()
    return resolved.parents[3] / "src" / "tau2" / "domains" / resolved.name if len(resolved.parents) > 3 else path


def read_domain(path: Path, split: str = DEFAULT_SPLIT, source: Path | None = None) -> Tau2Domain:
    """Read a τ² domain's data folder; :class:`Tau2ImportError` says what is wrong."""
    path = Path(path)
    if not path.is_dir():
        raise Tau2ImportError(f"{path}: no such folder; expected a τ² domain folder such as data/tau2/domains/airline")
    if path.resolve().name == "telecom":
        raise Tau2ImportError(f"{path}: the telecom domain is read by read_telecom")
    missing = [p for p in ("db.json", "tasks.json", "policy.md") if not (path / p).exists()]
    name = path.resolve().name
    if missing and name not in LATER:
        raise Tau2ImportError(
            f"{path}: not a τ² domain folder (no {', '.join(missing)}); expected a folder such as "
            "data/tau2/domains/airline with db.json, tasks.json and policy.md"
        )
    if name in LATER:
        raise Tau2ImportError(f"{path}: τ² domain {name!r} cannot be imported yet: {LATER[name]}; "
                              f"importable: {', '.join([*DOMAINS, 'telecom'])}")
    if name not in DOMAINS:
        raise Tau2ImportError(f"{path}: τ² domain {name!r} has no handler module here; "
                              f"known: {', '.join([*DOMAINS, 'telecom'])}")
    src = Path(source) if source is not None else source_folder(path)
    tools = read_tools(src / "tools.py", DOMAINS[name].toolkit, src / "data_model.py")
    known = _template_tools(name)
    for tool in tools:
        if tool["name"] not in known:
            raise Tau2ImportError(
                f"{src / 'tools.py'}:{tool['_line']}: unknown tool {tool['name']!r}: tau2_{name}_handlers.py has no "
                f"handler for it (it has: {', '.join(sorted(known))})"
            )
    tasks = _read_tasks(path, split, {t["name"] for t in tools})
    return Tau2Domain(name=name, path=path, split=split, tools=tools, tasks=tasks,
                      data=_read_data(path / "db.json", DOMAINS[name]), policy=_read_text(path / "policy.md"))


def _template_tools(domain: str) -> set[str]:
    tree = ast.parse((TEMPLATES / f"tau2_{domain}_handlers.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()  # pragma: no cover - every template has __all__


def _read_data(file: Path, shape: Shape) -> dict[str, dict[str, dict[str, Any]]]:
    db = _read_json(file)
    if not isinstance(db, dict):
        raise Tau2ImportError(f"{file}: expected an object of tables ({', '.join(shape.tables)})")
    data = {}
    for table, key in shape.tables.items():
        rows = db.get(table)
        if not isinstance(rows, dict) or not all(isinstance(r, dict) for r in rows.values()):
            raise Tau2ImportError(f"{file}: expected {table!r}: an object of {table} by {key} (each an object)")
        for k, row in rows.items():
            if row.get(key) != k:
                raise Tau2ImportError(f"{file}: {table} {k!r} has {key} {row.get(key)!r}; expected the same as its key")
        data[table] = rows
    return data


def _read_tasks(path: Path, split: str, tools: set[str]) -> list[Tau2Task]:
    file = path / "tasks.json"
    raw = _read_json(file)
    if not isinstance(raw, list) or not all(isinstance(t, dict) and isinstance(t.get("id"), str) for t in raw):
        raise Tau2ImportError(f"{file}: expected a list of tasks, each an object with a string id")
    splits_file = path / "split_tasks.json"
    if splits_file.exists():
        splits = _read_json(splits_file)
        if not isinstance(splits, dict) or split not in splits:
            have = ", ".join(sorted(splits)) if isinstance(splits, dict) else "none"
            raise Tau2ImportError(f"{splits_file}: no split {split!r} (it has: {have})")
        wanted = [str(i) for i in splits[split]]
    elif split == DEFAULT_SPLIT:
        wanted = [t["id"] for t in raw]
    else:
        raise Tau2ImportError(f"{path}: no split_tasks.json, so no split {split!r}")
    by_id = {t["id"]: t for t in raw}
    tasks = []
    for tid in wanted:
        if tid not in by_id:
            raise Tau2ImportError(f"{splits_file}: split {split!r} names task {tid!r}, which tasks.json does not have")
        tasks.append(_read_task(file, by_id[tid], tools))
    return tasks


def _read_task(file: Path, task: dict[str, Any], tools: set[str]) -> Tau2Task:
    tid = task["id"]
    where = f"{file}: task {tid!r}"
    criteria = task.get("evaluation_criteria")
    if not isinstance(criteria, dict):
        raise Tau2ImportError(f"{where}: no evaluation_criteria")
    basis = criteria.get("reward_basis")
    if not isinstance(basis, list) or not basis or not all(b in BASES for b in basis):
        raise Tau2ImportError(f"{where}: reward_basis {basis!r} is not a list of {', '.join(BASES)}")
    ungraded = [b for b in basis if b not in (*GRADED, "NL_ASSERTION")]
    if ungraded:
        raise Tau2ImportError(f"{where}: reward basis {', '.join(ungraded)} cannot be imported yet "
                              "(it grades the user's side of the world or the action list)")
    state = task.get("initial_state") or {}
    if any(state.get(k) for k in ("initialization_data", "initialization_actions", "message_history")):
        raise Tau2ImportError(f"{where}: an initial_state cannot be imported yet (task setup waits for dual control)")
    actions = []
    for n, action in enumerate(criteria.get("actions") or []):
        name, args = action.get("name") if isinstance(action, dict) else None, (action or {}).get("arguments", {})
        if not isinstance(name, str) or not isinstance(args, dict):
            raise Tau2ImportError(f"{where}: action {n + 1} is not {{name: <tool>, arguments: {{...}}}}")
        if action.get("requestor", "assistant") not in (None, "assistant"):
            raise Tau2ImportError(f"{where}: action {n + 1} is the user's; user tools cannot be imported yet")
        if name not in tools:
            raise Tau2ImportError(f"{where}: action {n + 1} calls {name!r}, which is not a tool of this domain")
        actions.append((name, args))
    scenario = (task.get("user_scenario") or {}).get("instructions")
    if isinstance(scenario, dict):
        parts = [scenario.get(k) for k in ("reason_for_call", "known_info", "unknown_info", "task_instructions")]
        instructions = "\n\n".join(str(p).strip() for p in parts if p and str(p).strip() not in ("", "."))
    else:
        instructions = str(scenario or "")
    purpose = (task.get("description") or {}).get("purpose") if isinstance(task.get("description"), dict) else None
    return Tau2Task(
        id=tid,
        instructions=instructions or "You need some help.",
        actions=actions,
        reward_basis=[str(b) for b in basis],
        communicate_info=[str(i) for i in criteria.get("communicate_info") or []],
        nl_assertions=[str(a) for a in criteria.get("nl_assertions") or []],
        purpose=str(purpose) if purpose else None,
    )


# -- the toolkit's schemas, read from its source ----------------------------------------


_SCALARS = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "dict": "object",
            "Dict": "object", "list": "array", "List": "array"}


@dataclass
class _Models:
    """``data_model.py`` read: the ``Literal`` aliases and the pydantic models' fields."""

    literals: dict[str, list[Any]] = field(default_factory=dict)
    models: dict[str, list[tuple[str, ast.expr, str, bool]]] = field(default_factory=dict)


def _read_models(path: Path, enums: bool = False) -> _Models:
    out = _Models()
    if not path.exists():
        return out
    for node in _parse(path).body:
        if enums and isinstance(node, ast.ClassDef) and any(
                isinstance(b, ast.Name) and b.id == "Enum" for b in node.bases):  # `class X(str, Enum)`: its values
            out.literals[node.name] = [stmt.value.value for stmt in node.body if isinstance(stmt, ast.Assign)
                                       and isinstance(stmt.value, ast.Constant)]
            continue
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name) and value.value.id == "Literal":
                items = value.slice.elts if isinstance(value.slice, ast.Tuple) else [value.slice]
                out.literals[node.targets[0].id] = [ast.literal_eval(i) for i in items]
        elif isinstance(node, ast.ClassDef):
            fields = []
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    desc, required = "", stmt.value is None
                    if isinstance(stmt.value, ast.Call):
                        kws = {k.arg: k.value for k in stmt.value.keywords if k.arg}
                        text = kws.get("description")
                        if isinstance(text, ast.Constant):
                            desc = str(text.value)
                        required = "default" not in kws and "default_factory" not in kws
                    fields.append((stmt.target.id, stmt.annotation, desc, required))
            out.models[node.name] = fields
    return out


def _parse(path: Path) -> ast.Module:
    try:
        return ast.parse(_read_text(path), filename=str(path))
    except SyntaxError as e:
        raise Tau2ImportError(f"{path}:{e.lineno}: not valid Python: {e.msg}") from None


def _schema(node: ast.expr | None, models: _Models, depth: int = 0) -> tuple[dict[str, Any], bool]:
    """A JSON Schema for an annotation, and whether it allows None (Optional)."""
    if node is None:
        return {"type": "string"}, False
    if isinstance(node, ast.Constant) and node.value is None:
        return {"type": "null"}, True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # X | Y
        return _union([node.left, node.right], models, depth)
    if isinstance(node, ast.Name):
        if node.id in _SCALARS:
            return {"type": _SCALARS[node.id]}, False
        if node.id in models.literals:
            values = models.literals[node.id]
            return {"type": "string" if all(isinstance(v, str) for v in values) else "number", "enum": values}, False
        if node.id in models.models and depth < 4:
            props, required = {}, []
            for name, ann, desc, req in models.models[node.id]:
                spec, nullable = _schema(ann, models, depth + 1)
                props[name] = {**spec, **({"description": desc} if desc else {})}
                if req and not nullable:
                    required.append(name)
            return {"type": "object", "properties": props, "required": required}, False
        return {"type": "object"}, False
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        outer = node.value.id
        inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if outer == "Optional":
            return _schema(inner[0], models, depth)[0], True
        if outer == "Union":
            return _union(list(inner), models, depth)
        if outer in ("List", "list"):
            return {"type": "array", "items": _schema(inner[0], models, depth)[0]}, False
        if outer == "Literal":
            return {"type": "string", "enum": [ast.literal_eval(i) for i in inner]}, False
        if outer in ("Dict", "dict"):
            return {"type": "object"}, False
    return {"type": "string"}, False


def _union(members: list[ast.expr], models: _Models, depth: int) -> tuple[dict[str, Any], bool]:
    """``A | dict`` (τ²'s "a model or its dict"), ``A | None``: the first member that
    is not None and not a bare dict."""
    nullable = any(isinstance(m, ast.Constant) and m.value is None for m in members)
    real = [m for m in members if not (isinstance(m, ast.Constant) and m.value is None)]
    chosen = next((m for m in real if not (isinstance(m, ast.Name) and m.id == "dict")), real[0] if real else None)
    spec, inner_nullable = _schema(chosen, models, depth)
    return spec, nullable or inner_nullable


def _doc_parts(doc: str) -> tuple[str, dict[str, str]]:
    """A docstring's description (the text before ``Args:``) and its ``Args:`` entries."""
    lines = [line.strip() for line in doc.strip().splitlines()]
    summary: list[str] = []
    args: dict[str, str] = {}
    section, current = "summary", None
    for line in lines:
        if line in ("Args:", "Arguments:"):
            section = "args"
            continue
        if line.endswith(":") and line[:-1] in ("Returns", "Raises", "Example", "Examples", "Note"):
            section = "other"
            continue
        if section == "summary":
            summary.append(line)
        elif section == "args" and line:
            head, sep, rest = line.partition(":")
            if sep and head.strip().isidentifier() and " " not in head.strip():
                current = head.strip()
                args[current] = rest.strip()
            elif current:
                args[current] = f"{args[current]} {line}".strip()
    text = " ".join(s for s in summary if s) if summary else ""
    return text, args


def read_tools(tools_py: Path, toolkit: str, data_model: Path, enums: bool = False) -> list[dict[str, Any]]:
    """Each ``@is_tool`` method of class ``toolkit`` in ``tools_py``, in source order
    (``enums``: an annotation naming an ``Enum`` class of ``data_model`` takes its values)."""
    if not tools_py.exists():
        raise Tau2ImportError(
            f"{tools_py}: missing; expected τ²'s toolkit source (give --source <src/tau2/domains/NAME>)")
    models = _read_models(data_model, enums)
    tree = _parse(tools_py)
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == toolkit), None)
    if cls is None:
        raise Tau2ImportError(f"{tools_py}: no class {toolkit}")
    tools = []
    for fn in cls.body:
        if not isinstance(fn, ast.FunctionDef) or not any(
            isinstance(d, ast.Call) and isinstance(d.func, ast.Name) and d.func.id == "is_tool"
            for d in fn.decorator_list
        ):
            continue
        description, arg_docs = _doc_parts(ast.get_docstring(fn) or "")
        params = fn.args.args[1:]  # self
        defaults = [None] * (len(params) - len(fn.args.defaults)) + list(fn.args.defaults)
        props: dict[str, Any] = {}
        required = []
        for arg, default in zip(params, defaults):
            spec, nullable = _schema(arg.annotation, models)
            if arg.arg in arg_docs:
                spec = {**spec, "description": arg_docs[arg.arg]}
            props[arg.arg] = spec
            if default is None and not nullable:
                required.append(arg.arg)
        tools.append({"name": fn.name, "description": description,
                      "parameters": {"type": "object", "properties": props, "required": required},
                      "_line": fn.lineno})
    if not tools:
        raise Tau2ImportError(f"{tools_py}: class {toolkit} has no @is_tool methods")
    return tools


# -- writing -----------------------------------------------------------------------------


def _tool_lines(domain: str, tool: Mapping[str, Any]) -> list[str]:
    params = tool["parameters"]
    required = set(params.get("required", []))
    lines = [f"  - name: {_name(tool['name'])}"]
    if tool.get("description"):
        lines.append(f"    description: {_q(tool['description'])}")
    if params["properties"]:
        lines.append("    params:")
        lines += [f"      {_name(n)}: {_q(_param(p, n in required))}" for n, p in params["properties"].items()]
    lines.append(f"    handler: tau2_{domain}_handlers:{tool['name']}")
    if tool["name"] == "transfer_to_human_agents":
        lines.append("    handoff: true")
    return lines


def reference_reply(task: Tau2Task) -> str:
    """The reference's last reply: every ``communicate_info`` string when the basis
    counts them (τ²'s gold replay says nothing, so this is ours)."""
    if task.communicate_info and "COMMUNICATE" in task.reward_basis:
        return "Here is what you asked for: " + "; ".join(task.communicate_info) + "."
    return "Done. Is there anything else?"


def _about(domain: str, split: str, task: Tau2Task) -> str:
    text = f"τ² {domain} task {task.id} ({split} split); reward basis: {', '.join(task.reward_basis)}."
    if task.purpose:
        text += f" Purpose: {task.purpose.strip()}"
    if task.nl_assertions:
        text += (f" NL assertions: the task's judge: criteria ({', '.join(_nl_ids(task))}), judged with "
                 "--sandtable-judge, never counted in the verdict.")
    notes = []
    if task.communicate_info and "COMMUNICATE" not in task.reward_basis:
        notes += [f"communicate_info (τ² does not count it for this task): {i}" for i in task.communicate_info]
    if notes:
        text += " NOT COUNTED (its basis does not name COMMUNICATE; kept as notes): " + " | ".join(notes)
    return text


def _nl_ids(task: Tau2Task) -> list[str]:
    return [f"nl-assertion-{n}" for n in range(1, len(task.nl_assertions) + 1)]


def judge_question(assertion: str) -> str:
    """τ²'s NL assertion (a statement of what the agent should do) as a judged criterion's
    yes/no question, yes when the agent did as it says."""
    return f"Did the agent do as this says: {assertion.strip()}"


def _task_lines(domain: str, split: str, task: Tau2Task) -> list[str]:
    lines = [
        f"  - id: {task_id(domain, task.id)}",
        f"    description: {_q(_about(domain, split, task))}",
        "    user:",
        f"      instructions: {_q(task.instructions)}",
        f"      script: [{_q(OPENING_LINE)}]",
        "    expect:",
    ]
    if "DB" in task.reward_basis:
        lines.append("      world_matches_reference: true")
    if "COMMUNICATE" in task.reward_basis and task.communicate_info:
        lines.append(f"      reply_includes: {_q(task.communicate_info)}")
    if lines[-1] == "    expect:":
        raise Tau2ImportError(f"task {task.id!r}: reward basis {', '.join(task.reward_basis)} leaves nothing "
                              "this import can grade")
    if task.nl_assertions:  # τ²'s NL_ASSERTION component: judged, never gating (docs/judges.md)
        lines.append("    judge:")
        lines += [f"      {cid}: {_q(judge_question(a))}" for cid, a in zip(_nl_ids(task), task.nl_assertions)]
    lines.append("    reference:")
    lines += [f"      - {{call: {_name(name)}, args: {_q(args)}}}" for name, args in task.actions]
    lines.append(f"      - {{say: {_q(reference_reply(task))}}}")
    return lines


def domain_text(domain: Tau2Domain) -> str:
    shape = DOMAINS[domain.name]
    out = [
        "# Imported from τ²-bench by `python -m pytest_sandtable import tau2`; see docs/import.md.",
        "version: 1",
        f"name: tau2-{domain.name}",
        f"description: {_q(f'τ²-bench {domain.name} domain ({domain.split} split), imported.')}",
        f"policy: {_block(domain.policy, '  ')}",
        f"clock: {{now: {_q(TAU2_NOW)}}}",
        "world:",
    ]
    for table, key in shape.tables.items():
        rows = list(domain.data[table].values())
        seen: dict[str, None] = {key: None}
        for row in rows:
            seen.update(dict.fromkeys(row))
        seen.update(dict.fromkeys(shape.written_fields.get(table, ())))
        out += [f"  {table}:", f"    key: {key}", f"    fields: {_q(list(seen))}", "    rows:"]
        out += [f"      - {_q(row)}" for row in rows]
    out.append("tools:")
    for tool in domain.tools:
        out += _tool_lines(domain.name, tool)
    out.append("tasks:")
    for task in domain.tasks:
        out += _task_lines(domain.name, domain.split, task)
    return "\n".join(out) + "\n"


def tau2_data(domain: str, tables: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A world's tables as τ²'s db.json holds them: table -> key -> row."""
    return {t: {row[key]: dict(row) for row in tables.get(t, ())} for t, key in DOMAINS[domain].tables.items()}


@dataclass
class ImportResult:
    domain_file: Path
    handler_file: Path
    tools: int
    tasks: int
    rows: dict[str, int]


def import_tau2(path: Path, out: Path, split: str = DEFAULT_SPLIT, force: bool = False,
                source: Path | None = None) -> ImportResult:
    """Read the τ² domain at ``path`` and write ``out/sandtable.yaml`` and its handler module."""
    if split not in SPLITS:
        raise Tau2ImportError(f"--split {split}: expected one of {', '.join(SPLITS)}")
    if Path(path).is_dir() and Path(path).resolve().name == "telecom":
        from .tau2_telecom import import_telecom

        return import_telecom(Path(path), Path(out), split, force, source)
    domain = read_domain(path, split, source)
    out = Path(out)
    check_out(out, force, Tau2ImportError)
    text = domain_text(domain)
    _check_round_trip(domain, text)
    handler = write_import(out, f"tau2_{domain.name}_handlers.py", text)
    return ImportResult(out / DOMAIN_FILE, handler, len(domain.tools), len(domain.tasks),
                        {t: len(r) for t, r in domain.data.items()})


def _check_round_trip(domain: Tau2Domain, text: str) -> None:
    import yaml

    loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    doc = yaml.load(text, Loader=loader)
    back = tau2_data(domain.name, {name: spec["rows"] for name, spec in doc["world"].items()})
    if _typed(back) != _typed(domain.data) or doc["policy"] != domain.policy:
        raise Tau2ImportError(f"{domain.path}: the data does not survive being written as YAML; please report this")

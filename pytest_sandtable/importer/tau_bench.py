"""``python -m pytest_sandtable import tau-bench PATH -o DIR``: a τ-bench environment
(``tau_bench/envs/retail`` or ``.../airline``) as a sandtable domain.

τ-bench's files are read, never executed (running them would mean running a
third-party package's code at import time): the tools' ``get_info()`` schemas and the
tasks in ``tasks_test.py`` are read with :mod:`ast` (``literal_eval`` of the dict,
``Task(...)`` and ``Action(...)`` arguments), the data from ``data/*.json``, the
policy from ``wiki.md``. What the tools *do* cannot be read that way: it is in the
handler modules shipped here (``templates/tau_<env>_handlers.py``, reimplementations
of every tool), copied next to the domain file the import writes.

The domain file is written with every value JSON-quoted (a JSON scalar is a YAML
scalar with the same value, and a quoted string never turns into a date or a number
under YAML's rules), then loaded back and compared with the data it came from, so an
import that would change a single value fails instead of being written.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..domain.files import write_atomic
from .tau_rules import rules_for

__all__ = [
    "ENVS",
    "TauEnv",
    "TauImportError",
    "TauTask",
    "import_tau_bench",
    "read_env",
    "task_id",
    "tau_data",
]

TEMPLATES = Path(__file__).resolve().parent / "templates"
DOMAIN_FILE = "sandtable.yaml"
# τ-bench's clock: wiki.md says "The current time is 2024-05-15 15:00:00 EST"
TAU_NOW = "2024-05-15T15:00:00-05:00"
# what the scripted user says first; a model-backed user ignores it and follows the
# instructions, as τ-bench's simulated user does
OPENING_LINE = "Hi, I need some help."
SPLIT = "test"
# τ-bench's action for a reply to the user (its kwargs: {"content": ...})
RESPOND = "respond"


@dataclass(frozen=True)
class EnvShape:
    """What the import knows about one τ-bench environment: its tables (data file
    stem -> key field) and the fields its tools write that no seed row may have yet."""

    tables: Mapping[str, str]
    written_fields: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


ENVS: Mapping[str, EnvShape] = {
    "retail": EnvShape(
        tables={"users": "user_id", "orders": "order_id", "products": "product_id"},
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
    "airline": EnvShape(
        tables={"users": "user_id", "flights": "flight_number", "reservations": "reservation_id"},
        written_fields={"reservations": ("status",)},
    ),
}


class TauImportError(Exception):
    """Why an import cannot be done: the message the command prints after ``error:``."""


@dataclass
class TauTask:
    index: int
    user_id: str | None
    instruction: str
    actions: list[tuple[str, dict[str, Any]]]
    outputs: list[str]
    lines: list[int] = field(default_factory=list)  # each action's line in tasks_test.py


@dataclass
class TauEnv:
    name: str
    path: Path
    tools: list[dict[str, Any]]  # each tool's get_info()["function"]
    tasks: list[TauTask]
    data: dict[str, dict[str, dict[str, Any]]]  # table -> key -> row, as τ-bench holds it
    policy: str


def task_id(env: str, index: int) -> str:
    return f"{env}-{SPLIT}-{index:03d}"


# -- reading ---------------------------------------------------------------------------


def read_env(path: Path) -> TauEnv:
    """Read a τ-bench ``envs/<name>`` folder; :class:`TauImportError` says what is wrong."""
    path = Path(path)
    if not path.is_dir():
        raise TauImportError(f"{path}: no such folder; expected a τ-bench env folder such as tau_bench/envs/retail")
    missing = [p for p in ("tools", "data", "wiki.md", "tasks_test.py") if not (path / p).exists()]
    if missing:
        raise TauImportError(
            f"{path}: not a τ-bench env folder (no {', '.join(missing)}); expected a folder such as "
            "tau_bench/envs/retail with tools/, data/, wiki.md and tasks_test.py"
        )
    name = path.resolve().name
    if name not in ENVS:
        raise TauImportError(
            f"{path}: τ-bench env {name!r} has no handler module here; known: {', '.join(sorted(ENVS))}"
        )
    tools = _read_tools(path / "tools")
    known = _template_tools(name)
    for tool in tools:
        if tool["name"] not in known:
            raise TauImportError(
                f"{path / 'tools' / tool['_file']}: unknown tool {tool['name']!r}: tau_{name}_handlers.py has no "
                f"handler for it (it has: {', '.join(sorted(known))})"
            )
    tasks = _read_tasks(path / "tasks_test.py")
    _check_actions(path / "tasks_test.py", tasks, {t["name"] for t in tools})
    return TauEnv(
        name=name,
        path=path,
        tools=tools,
        tasks=tasks,
        data=_read_data(path / "data", ENVS[name]),
        policy=_read_text(path / "wiki.md"),
    )


def _check_actions(path: Path, tasks: list[TauTask], tools: set[str]) -> None:
    """Every action of every task is a tool of the env (or τ-bench's ``respond``)."""
    for task in tasks:
        for (name, _), line in zip(task.actions, task.lines):
            if name != RESPOND and name not in tools:
                raise TauImportError(
                    f"{path}:{line}: task {task.index} calls {name!r}, which is not a tool of this env"
                )


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TauImportError(f"{path}: cannot read: {e}") from None


def _parse(path: Path) -> ast.Module:
    try:
        return ast.parse(_read_text(path), filename=str(path))
    except SyntaxError as e:
        raise TauImportError(f"{path}:{e.lineno}: not valid Python: {e.msg}") from None


def _literal(path: Path, node: ast.AST, what: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        line = getattr(node, "lineno", 0)
        raise TauImportError(
            f"{path}:{line}: {what} is not a literal (the import reads τ-bench's files, never runs them)"
        ) from None


def _tool_order(tools_dir: Path) -> list[str] | None:
    """Module names of ``tools/__init__.py``'s ``ALL_TOOLS``, in order (None without one)."""
    init = tools_dir / "__init__.py"
    if not init.exists():
        return None
    tree = _parse(init)
    module_of = {
        alias.asname or alias.name: node.module
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ALL_TOOLS" for t in node.targets):
            if isinstance(node.value, ast.List):
                return [str(module_of.get(e.id, e.id)) for e in node.value.elts if isinstance(e, ast.Name)]
    return None


def _get_info(path: Path) -> dict[str, Any] | None:
    """The dict a tool class's ``get_info()`` returns, read from its source."""
    for node in ast.walk(_parse(path)):
        if isinstance(node, ast.FunctionDef) and node.name == "get_info":
            for stmt in ast.walk(node):
                if isinstance(stmt, ast.Return) and stmt.value is not None:
                    info = _literal(path, stmt.value, "get_info()'s return value")
                    if not (isinstance(info, dict) and isinstance(info.get("function"), dict)
                            and isinstance(info["function"].get("name"), str)):
                        raise TauImportError(f"{path}:{stmt.lineno}: get_info() does not return "
                                             "{'type': 'function', 'function': {'name': ..., ...}}")
                    return dict(info["function"])
    return None


def _read_tools(tools_dir: Path) -> list[dict[str, Any]]:
    if not tools_dir.is_dir():
        raise TauImportError(f"{tools_dir}: not a folder; expected τ-bench's tool modules")
    files = {p.stem: p for p in sorted(tools_dir.glob("*.py")) if p.name != "__init__.py"}
    order = _tool_order(tools_dir)
    stems = [s.lstrip(".") for s in order] if order else sorted(files)
    tools = []
    for stem in stems:
        if stem not in files:
            raise TauImportError(f"{tools_dir / '__init__.py'}: ALL_TOOLS names {stem}, but there is no {stem}.py")
        info = _get_info(files[stem])
        if info is None:
            raise TauImportError(f"{files[stem]}: no get_info() returning the tool's schema")
        info["_file"] = files[stem].name
        tools.append(info)
    if not tools:
        raise TauImportError(f"{tools_dir}: no tool modules")
    return tools


def _template_tools(env: str) -> set[str]:
    """The tools the handler module of ``env`` implements: its ``__all__``, read, not imported."""
    tree = ast.parse((TEMPLATES / f"tau_{env}_handlers.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()  # pragma: no cover - every template has __all__


def _call_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name):
            return node.func.id
        if isinstance(node.func, ast.Attribute):
            return node.func.attr
    return None


def _read_tasks(path: Path) -> list[TauTask]:
    tree = _parse(path)
    calls: list[ast.Call] = []
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(value, ast.List):
            calls += [e for e in value.elts if isinstance(e, ast.Call) and _call_name(e) == "Task"]
    if not calls:
        raise TauImportError(f"{path}: no list of Task(...) found")
    return [_read_task(path, i, call) for i, call in enumerate(calls)]


def _read_task(path: Path, index: int, call: ast.Call) -> TauTask:
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    if "instruction" not in kw or "actions" not in kw:
        raise TauImportError(f"{path}:{call.lineno}: Task(...) without instruction= or actions=")
    actions_node = kw["actions"]
    if not isinstance(actions_node, ast.List):
        raise TauImportError(f"{path}:{actions_node.lineno}: Task(actions=...) is not a list of Action(...)")
    actions, lines = [], []
    for a in actions_node.elts:
        if _call_name(a) != "Action":
            raise TauImportError(f"{path}:{a.lineno}: expected Action(name=..., kwargs=...)")
        assert isinstance(a, ast.Call)
        akw = {k.arg: k.value for k in a.keywords if k.arg}
        name = _literal(path, akw["name"], "Action name") if "name" in akw else None
        args = _literal(path, akw["kwargs"], "Action kwargs") if "kwargs" in akw else {}
        if not isinstance(name, str) or not isinstance(args, dict):
            raise TauImportError(f"{path}:{a.lineno}: expected Action(name='<tool>', kwargs={{...}})")
        actions.append((name, args))
        lines.append(a.lineno)
    instruction = _literal(path, kw["instruction"], "Task instruction")
    outputs = _literal(path, kw["outputs"], "Task outputs") if "outputs" in kw else []
    user_id = _literal(path, kw["user_id"], "Task user_id") if "user_id" in kw else None
    return TauTask(index, user_id, str(instruction), actions, [str(o) for o in outputs], lines)


def _read_data(data_dir: Path, shape: EnvShape) -> dict[str, dict[str, dict[str, Any]]]:
    data = {}
    for table, key in shape.tables.items():
        file = data_dir / f"{table}.json"
        if not file.exists():
            holds = ", ".join(f"{t}.json" for t in shape.tables)
            raise TauImportError(f"{file}: missing; a τ-bench env's data/ holds {holds}")
        try:
            rows = json.loads(_read_text(file))
        except json.JSONDecodeError as e:
            raise TauImportError(f"{file}:{e.lineno}: not valid JSON: {e.msg}") from None
        if not isinstance(rows, dict) or not all(isinstance(r, dict) for r in rows.values()):
            raise TauImportError(f"{file}: expected an object of {table} by {key} (each an object)")
        for k, row in rows.items():
            if key in row and row[key] != k:
                raise TauImportError(f"{file}: {table} {k!r} has {key} {row[key]!r}; expected the same as its key")
        data[table] = rows
    return data


# -- the world and τ-bench's data --------------------------------------------------------


def world_rows(table: str, key: str, rows: Mapping[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """A τ-bench table as seed rows: a row without its key field (τ-bench's users)
    gets it first, the others are as they are."""
    return [row if key in row else {key: k, **row} for k, row in rows.items()]


def tau_data(env: str, tables: Mapping[str, Iterable[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """A world's tables as τ-bench's data: table -> key -> row, without the key fields
    the import added, so it compares (and hashes) equal to τ-bench's own."""
    from .tau_common import USER_KEY

    out: dict[str, dict[str, Any]] = {}
    for table, key in ENVS[env].tables.items():
        out[table] = {}
        for row in tables.get(table, ()):
            clean = {k: v for k, v in row.items() if k != USER_KEY} if table == "users" else dict(row)
            out[table][row[key]] = clean
    return out


# -- writing -----------------------------------------------------------------------------


def _q(value: Any) -> str:
    """A value as YAML: JSON, which YAML reads back as the same value."""
    return json.dumps(value, ensure_ascii=False)


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# words YAML 1.1 reads as booleans or null when unquoted
_YAML_WORDS = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null"})


def _name(text: str) -> str:
    """A tool or param name, plain when YAML reads it back as the same text."""
    return text if _PLAIN.fullmatch(text) and text.lower() not in _YAML_WORDS else _q(text)


# the JSON Schema keywords a sandtable param takes (docs/spec.md, "Params")
_PARAM_KEYS = ("type", "description", "enum", "default", "properties", "items", "required")


def _param(spec: Mapping[str, Any], required: bool) -> dict[str, Any]:
    """A τ-bench JSON Schema property as a sandtable param (the subset params take;
    any other keyword, such as ``minimum``, is kept in the description, where the
    agent still reads it, as the spec advises)."""
    out: dict[str, Any] = {"type": spec.get("type", "string")}
    others = {k: v for k, v in spec.items() if k not in _PARAM_KEYS}
    if others:
        extra = "; ".join(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in others.items())
        spec = {**spec, "description": f"{spec.get('description', '')} (schema: {extra})".strip()}
    for k in ("description", "enum", "default"):
        if k in spec:
            out[k] = spec[k]
    if not required:
        out["required"] = False
    if out["type"] == "object" and isinstance(spec.get("properties"), dict):
        inner = set(spec.get("required", []))
        out["properties"] = {n: _param(p, n in inner) for n, p in spec["properties"].items()}
    if out["type"] == "array" and isinstance(spec.get("items"), dict):
        out["items"] = _param(spec["items"], True)
        out["items"].pop("required", None)
    return out


def _tool_lines(env: str, tool: Mapping[str, Any]) -> list[str]:
    params = tool.get("parameters") or {}
    required = set(params.get("required", []))
    props = params.get("properties") or {}
    lines = [f"  - name: {_name(tool['name'])}"]
    if tool.get("description"):
        lines.append(f"    description: {_q(tool['description'])}")
    if props:
        lines.append("    params:")
        lines += [f"      {_name(n)}: {_q(_param(p, n in required))}" for n, p in props.items()]
    lines.append(f"    handler: tau_{env}_handlers:{tool['name']}")
    if tool["name"] == "transfer_to_human_agents":
        lines.append("    handoff: true")
    return lines


def _block(text: str, indent: str) -> str:
    """A string as a YAML literal block when that reads back exactly, else quoted."""
    import yaml

    lines = text.split("\n")
    if text.endswith("\n") and not text.endswith("\n\n") and lines[0][:1] not in (" ", "\t") and "\t" not in text:
        body = "\n".join(f"{indent}{line}" if line else "" for line in lines[:-1])
        candidate = f"|\n{body}\n"
        try:
            if yaml.safe_load(f"k: {candidate}") == {"k": text}:
                return candidate.rstrip("\n")
        except yaml.YAMLError:
            pass
    return _q(text)


def _reference_reply(task: TauTask) -> str:
    if task.outputs:
        return "Here is what you asked for: " + "; ".join(task.outputs) + "."
    return "Done. Is there anything else?"


def _task_lines(env: str, task: TauTask) -> list[str]:
    about = f"τ-bench {env} {SPLIT} task {task.index}" + (f", user {task.user_id}" if task.user_id else "")
    lines = [
        f"  - id: {task_id(env, task.index)}",
        f"    description: {_q(about + '.')}",
        "    user:",
        f"      instructions: {_q(task.instruction)}",
        f"      script: [{_q(OPENING_LINE)}]",
        "    expect:",
        "      world_matches_reference: true",
    ]
    if task.outputs:
        lines.append(f"      reply_includes: {_q(task.outputs)}")
    lines.append("    reference:")
    lines += [
        f"      - {{say: {_q(str(args.get('content', '')))}}}" if name == RESPOND
        else f"      - {{call: {_name(name)}, args: {_q(args)}}}"
        for name, args in task.actions
    ]
    lines.append(f"      - {{say: {_q(_reference_reply(task))}}}")
    return lines


def domain_text(env: TauEnv) -> str:
    shape = ENVS[env.name]
    out = [
        "# Imported from τ-bench by `python -m pytest_sandtable import tau-bench`; see docs/import.md.",
        "version: 1",
        f"name: tau-{env.name}",
        f"description: {_q(f'τ-bench {env.name} environment, imported.')}",
        f"policy: {_block(env.policy, '  ')}",
        f"clock: {{now: {_q(TAU_NOW)}}}",
        "world:",
    ]
    for table, key in shape.tables.items():
        rows = world_rows(table, key, env.data[table])
        seen: dict[str, None] = {key: None}
        for row in rows:
            seen.update(dict.fromkeys(row))
        seen.update(dict.fromkeys(shape.written_fields.get(table, ())))
        out += [f"  {table}:", f"    key: {key}", f"    fields: {_q(list(seen))}", "    rows:"]
        out += [f"      - {_q(row)}" for row in rows]
    out.append("tools:")
    for tool in env.tools:
        out += _tool_lines(env.name, tool)
    rules = rules_for(env.name, env.policy, {t["name"] for t in env.tools})
    if rules:
        out.append("invariants:")
        out += [f"  - {_q(rule)}" for rule in rules]
    out.append("tasks:")
    for task in env.tasks:
        out += _task_lines(env.name, task)
    return "\n".join(out) + "\n"


@dataclass
class ImportResult:
    domain_file: Path
    handler_file: Path
    tools: int
    tasks: int
    rules: int
    rows: dict[str, int]


def check_out(out: Path, force: bool, error: type[Exception]) -> None:
    """An import's output folder: absent, empty, or written into only with ``--force``."""
    if out.exists() and not out.is_dir():
        raise error(f"{out}: exists and is not a folder")
    if out.exists() and any(out.iterdir()) and not force:
        raise error(f"{out}: exists and is not empty; pass --force to write into it")


def write_import(out: Path, handler_name: str, text: str) -> Path:
    """Write the handler module (the template of that name), then the domain file: a
    domain file never names a module that is not there. Returns the handler's path."""
    out.mkdir(parents=True, exist_ok=True)
    handler = out / handler_name
    write_atomic(handler, (TEMPLATES / handler_name).read_bytes())
    write_atomic(out / DOMAIN_FILE, text.encode("utf-8"))
    return handler


def import_tau_bench(path: Path, out: Path, force: bool = False) -> ImportResult:
    """Read the env at ``path`` and write ``out/sandtable.yaml`` and its handler module."""
    env = read_env(path)
    out = Path(out)
    check_out(out, force, TauImportError)
    text = domain_text(env)
    _check_round_trip(env, text)
    handler = write_import(out, f"tau_{env.name}_handlers.py", text)
    return ImportResult(
        domain_file=out / DOMAIN_FILE,
        handler_file=handler,
        tools=len(env.tools),
        tasks=len(env.tasks),
        rules=len(rules_for(env.name, env.policy, {t["name"] for t in env.tools})),
        rows={t: len(r) for t, r in env.data.items()},
    )


def _check_round_trip(env: TauEnv, text: str) -> None:
    """The written world reads back as exactly τ-bench's data (types included), or the
    import stops before writing anything."""
    import yaml

    try:
        loader: Any = yaml.CSafeLoader
    except AttributeError:  # pragma: no cover - PyYAML without libyaml
        loader = yaml.SafeLoader
    doc = yaml.load(text, Loader=loader)
    tables = {name: spec["rows"] for name, spec in doc["world"].items()}
    back = tau_data(env.name, tables)
    if _typed(back) != _typed(env.data):
        raise TauImportError(f"{env.path}: the data does not survive being written as YAML; please report this")
    if doc["policy"] != env.policy:
        raise TauImportError(
            f"{env.path / 'wiki.md'}: the policy does not survive being written as YAML; please report this"
        )


def _typed(value: Any) -> Any:
    """A value with every scalar's type kept, so 1 and 1.0 and True compare unequal."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)

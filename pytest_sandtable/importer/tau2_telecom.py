"""``import tau2 data/tau2/domains/telecom -o DIR``: τ²'s telecom domain (dual control).

Read as data, never run: ``db.toml`` (the carrier's tables) and ``user_db.toml`` (the
caller's phone) with :mod:`tomllib`, ``tasks.json`` and ``split_tasks.json``,
``main_policy.md`` and ``tech_support_manual.md`` (joined as τ²'s environment joins
them), and the two toolkits' schemas from their source (``tools.py``'s
``TelecomTools``, ``user_tools.py``'s ``TelecomUserTools``; their ``Enum`` classes
from ``data_model.py`` and ``user_data_model.py``), with :mod:`ast`. What the tools do
is the handler module ``templates/tau2_telecom_handlers.py``, copied next to the
domain file.

What maps to what (docs/import.md, "τ² telecom"):

- ``db.toml`` -> ``world`` (plans, customers, lines, bills, devices, keyed by their
  ids; a field τ²'s model leaves ``None`` by default is written as ``null``);
  ``user_db.toml`` over τ²'s defaults -> ``user_world`` (``device``: one row ``phone``;
  ``surroundings``: one row ``user``);
- the toolkits -> ``tools`` and ``user_tools`` (each ``handler:``); τ²'s
  ``sync_tools`` -> ``sync``;
- a task's ``initial_state``: ``initialization_data.user_data`` -> ``user_given``,
  ``initialization_actions`` -> ``setup`` (a tool of that side -> ``{call, args}``,
  ``by: user`` for the phone's; any other function -> ``{handler, args}``),
  ``message_history`` -> ``history``;
- ``evaluation_criteria``: ``env_assertions`` -> ``expect.assert``, ``actions`` ->
  ``expect.called`` (``by: user`` for the user's; ``compare_args`` picks the args),
  ``communicate_info`` -> ``reply_includes``, ``nl_assertions`` -> ``judge:``, and the
  reward basis -> ``expect.basis`` (DB -> state, ENV_ASSERTION -> assert, ACTION ->
  called, COMMUNICATE -> reply);
- the gold actions -> the agent's ``reference`` (its calls, and before each user action an
  instruction that names it: :data:`INSTRUCTIONS`), and the scripted user's ``call`` lines, each
  waiting for the agent's reply to ask for it (``when: {reply_matches: ...}``): the gold user
  actions in τ²'s order, then every other instruction the caller can follow, so that the user
  does what the agent says, whatever it says, and nothing it was not asked to do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from .tau2 import (
    DOMAIN_FILE,
    OPENING_LINE,
    ImportResult,
    Tau2ImportError,
    _read_json,
    _read_text,
    _tool_lines,
    judge_question,
    read_tools,
    source_folder,
)
from .tau_bench import _block, _name, _q, _typed, check_out, write_import
from .templates import tau2_telecom_handlers as tel

__all__ = ["INSTRUCTIONS", "TELECOM_NOW", "TelecomDomain", "TelecomTask", "ask", "import_telecom", "played_actions",
           "read_telecom", "reference_reply", "telecom_task_id", "user_script"]

HANDLERS = "tau2_telecom_handlers"
TELECOM_NOW = "2025-02-25T12:08:00-05:00"  # τ²'s get_now(), and its policy: "2025-02-25 12:08:00 EST"
# τ²'s fields whose model default is None (absent from db.toml when unset)
NULLABLE = {
    "devices": ("imei", "activation_date", "last_esim_transfer_date"),
    "lines": ("device_id", "contract_end_date", "last_plan_change_date", "last_sim_replacement_date",
              "suspension_start_date"),
    "customers": ("last_extension_date",),
}
BASIS = {"DB": "state", "ENV_ASSERTION": "assert", "ACTION": "called", "COMMUNICATE": "reply"}
USER_NEXT = "OK. What next?"  # the scripted user's `say_unknown`: after it acted, or when asked nothing it can do

# What the caller does when the agent tells it to: each of the phone's writes (with its arguments,
# for those that take some), the words the reference says to ask for it, and the pattern the
# scripted user waits for in the agent's reply before it makes the call (Python syntax, matched
# ignoring case: the tool's own name, as τ²'s manual writes it, or the usual wording). The phone's
# reads (check_status_bar, ...) are not here: a scripted user could not tell the agent what it saw.
_DO = r"(?:turn|switch|toggle|enable|disable)[^.?!]{0,20}"
_MODES = {"4g_5g_preferred": ("4G/5G preferred", r"4g_5g_preferred|4g ?/ ?5g"), "4g_only": ("4G only", r"4g[ _]only"),
          "3g_only": ("3G only", r"3g[ _]only"), "2g_only": ("2G only", r"2g[ _]only")}
INSTRUCTIONS: list[tuple[str, dict[str, Any], str, str]] = [
    ("toggle_airplane_mode", {}, "toggle airplane mode", rf"toggle_airplane_mode|{_DO}(?:airplane|flight) mode"),
    ("toggle_data", {}, "toggle mobile data", rf"toggle_data(?!_)|{_DO}mobile data(?! saver)"),
    ("toggle_roaming", {}, "toggle data roaming", rf"toggle_roaming|{_DO}roaming"),
    ("toggle_data_saver_mode", {}, "toggle data saver mode", rf"toggle_data_saver_mode|{_DO}data saver"),
    ("reset_apn_settings", {}, "reset your APN settings", r"reset_apn_settings|reset[^.?!]{0,20}apn"),
    ("reseat_sim_card", {}, "reseat your SIM card", r"reseat_sim_card|re-?seat[^.?!]{0,20}sim|take out[^.?!]{0,20}"
                                                     r"sim[^.?!]{0,30}(?:reinsert|put it back)"),
    ("reboot_device", {}, "reboot your phone", r"reboot_device|(?:reboot|restart)[^.?!]{0,15}(?:phone|device)"),
    ("toggle_wifi", {}, "toggle Wi-Fi", rf"toggle_wifi(?!_)|{_DO}wi-?fi(?! calling)"),
    ("toggle_wifi_calling", {}, "toggle Wi-Fi calling", rf"toggle_wifi_calling|{_DO}wi-?fi calling"),
    ("connect_vpn", {}, "connect to your VPN", r"(?<!dis)connect_vpn|(?<!dis)connect (?:to )?(?:the |your )?vpn"),
    ("disconnect_vpn", {}, "disconnect your VPN", r"disconnect_vpn|disconnect (?:from )?(?:the |your )?vpn"),
    ("make_payment", {}, "make the payment", r"make_payment|(?:make|complete)[^.?!]{0,20}payment"),
    *[("set_network_mode_preference", {"mode": mode}, f"set your network mode preference to {words}",
       rf"(?:set_network_mode_preference|network (?:mode|type))[^.?!]{{0,40}}(?:{pattern})")
      for mode, (words, pattern) in _MODES.items()],
    *[("grant_app_permission", {"app_name": app, "permission": perm}, f"grant the {app} app the {perm} permission",
       rf"grant(?:_app_permission)?\W[^.?!]{{0,40}}{app}\W[^.?!]{{0,40}}\b{perm}\b(?: permission|[\"'])")
      for app in ("messaging", "browser") for perm in ("sms", "storage", "phone", "network")],
]


def telecom_task_id(raw: str) -> str:
    """τ²'s ``[mobile_data_issue]airplane_mode_on|bad_vpn[PERSONA:Easy]`` as
    ``telecom-mobile_data_issue-airplane_mode_on.bad_vpn-PERSONA-Easy`` (a task id is letters,
    digits, ``_``, ``.`` and ``-``: the issues τ² joins with ``|`` are joined with ``.``)."""
    text = re.sub(r"[^A-Za-z0-9_.-]+", "-", raw.replace("|", ".")).strip("-")
    return f"telecom-{text}"


@dataclass
class TelecomTask:
    raw_id: str
    id: str
    instructions: str
    reward_basis: list[str]
    setup: list[dict[str, Any]]
    user_given: list[dict[str, Any]]
    history: list[dict[str, Any]]
    actions: list[tuple[str, dict[str, Any], str, list[str] | None]]  # name, args, requestor, compare_args
    assertions: list[tuple[str, dict[str, Any]]]
    communicate_info: list[str]
    nl_assertions: list[str]
    purpose: str | None = None


@dataclass
class TelecomDomain:
    path: Path
    split: str
    tools: list[dict[str, Any]]
    user_tools: list[dict[str, Any]]
    data: dict[str, list[dict[str, Any]]]
    user_data: dict[str, dict[str, Any]]
    policy: str
    tasks: list[TelecomTask] = field(default_factory=list)


def _read_toml(file: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(_read_text(file))
    except tomllib.TOMLDecodeError as e:
        raise Tau2ImportError(f"{file}: not valid TOML: {e}") from None


def _merge(base: Any, update: Any) -> Any:
    """``update`` over ``base``, mappings merged key by key (τ²'s update of a model with a dict)."""
    if isinstance(base, Mapping) and isinstance(update, Mapping):
        return {**base, **{k: _merge(base.get(k), v) for k, v in update.items()}}
    return update


def read_telecom(path: Path, split: str, source: Path | None = None) -> TelecomDomain:
    missing = [p for p in ("db.toml", "user_db.toml", "tasks.json", "main_policy.md", "tech_support_manual.md")
               if not (path / p).exists()]
    if missing:
        raise Tau2ImportError(f"{path}: not τ²'s telecom folder (no {', '.join(missing)}); expected "
                              "data/tau2/domains/telecom with db.toml, user_db.toml, tasks.json, main_policy.md "
                              "and tech_support_manual.md")
    src = Path(source) if source is not None else source_folder(path)
    tools = read_tools(src / "tools.py", "TelecomTools", src / "data_model.py", enums=True)
    user_tools = read_tools(src / "user_tools.py", "TelecomUserTools", src / "user_data_model.py", enums=True)
    for file, found, known in ((src / "tools.py", tools, tel.AGENT_TOOLS),
                               (src / "user_tools.py", user_tools, tel.USER_TOOLS)):
        for tool in found:
            if tool["name"] not in known:
                raise Tau2ImportError(
                    f"{file}:{tool['_line']}: unknown tool {tool['name']!r}: {HANDLERS}.py has no handler for it "
                    f"(it has: {', '.join(sorted(known))})")
    policy = (f"<main_policy>\n{_read_text(path / 'main_policy.md')}\n</main_policy>\n<tech_support_policy>\n"
              f"{_read_text(path / 'tech_support_manual.md')}\n</tech_support_policy>")
    domain = TelecomDomain(path=path, split=split, tools=tools, user_tools=user_tools,
                           data=_read_data(path / "db.toml"), user_data=_read_user_data(path / "user_db.toml"),
                           policy=policy)
    domain.tasks = _read_tasks(path, split, domain)
    return domain


def _read_data(file: Path) -> dict[str, list[dict[str, Any]]]:
    db = _read_toml(file)
    data = {}
    for table, key in tel.AGENT_TABLES.items():
        rows = db.get(table, [])
        if not isinstance(rows, list) or not all(isinstance(r, dict) and isinstance(r.get(key), str) for r in rows):
            raise Tau2ImportError(f"{file}: expected [[{table}]] entries, each with a string {key}")
        seen: set[str] = set()
        for row in rows:
            if row[key] in seen:
                raise Tau2ImportError(f"{file}: two {table} with {key} {row[key]!r}")
            seen.add(row[key])
            for name in NULLABLE.get(table, ()):
                row.setdefault(name, None)
        data[table] = rows
    return data


def _read_user_data(file: Path) -> dict[str, dict[str, Any]]:
    db = _read_toml(file)
    for part in ("device", "surroundings"):
        if not isinstance(db.get(part, {}), dict):
            raise Tau2ImportError(f"{file}: expected [{part}] to be a table")
    return {"device": _merge(tel.DEFAULT_DEVICE, db.get("device", {})),
            "surroundings": _merge(tel.DEFAULT_SURROUNDINGS, db.get("surroundings", {}))}


def _read_tasks(path: Path, split: str, domain: TelecomDomain) -> list[TelecomTask]:
    file = path / "tasks.json"
    raw = _read_json(file)
    if not isinstance(raw, list) or not all(isinstance(t, dict) and isinstance(t.get("id"), str) for t in raw):
        raise Tau2ImportError(f"{file}: expected a list of tasks, each an object with a string id")
    splits_file = path / "split_tasks.json"
    splits = _read_json(splits_file) if splits_file.exists() else {"base": [t["id"] for t in raw]}
    if not isinstance(splits, dict) or split not in splits:
        have = ", ".join(sorted(splits)) if isinstance(splits, dict) else "none"
        raise Tau2ImportError(f"{splits_file}: no split {split!r} (it has: {have})")
    by_id = {t["id"]: t for t in raw}
    tasks: list[TelecomTask] = []
    ids: dict[str, str] = {}
    for tid in map(str, splits[split]):
        if tid not in by_id:
            raise Tau2ImportError(f"{splits_file}: split {split!r} names task {tid!r}, which tasks.json does not have")
        task = _read_task(file, by_id[tid], domain)
        if task.id in ids:
            raise Tau2ImportError(f"{file}: tasks {ids[task.id]!r} and {tid!r} both become {task.id!r}")
        ids[task.id] = tid
        tasks.append(task)
    return tasks


def _instructions(task: Mapping[str, Any]) -> str:
    scenario = task.get("user_scenario") or {}
    parts = [scenario.get("persona")]
    inner = scenario.get("instructions")
    if isinstance(inner, dict):
        parts += [inner.get(k) for k in ("reason_for_call", "known_info", "unknown_info", "task_instructions")]
    else:
        parts.append(inner)
    return "\n\n".join(str(p).strip() for p in parts if p and str(p).strip() not in ("", ".")) or \
        "You need some help."


def _read_task(file: Path, task: dict[str, Any], domain: TelecomDomain) -> TelecomTask:
    tid = task["id"]
    where = f"{file}: task {tid!r}"
    criteria = task.get("evaluation_criteria")
    if not isinstance(criteria, dict):
        raise Tau2ImportError(f"{where}: no evaluation_criteria")
    basis = criteria.get("reward_basis")
    if not isinstance(basis, list) or not basis or not all(b in (*BASIS, "NL_ASSERTION") for b in basis):
        raise Tau2ImportError(f"{where}: reward_basis {basis!r} is not a list of "
                              f"{', '.join((*BASIS, 'NL_ASSERTION'))}")
    agent_tools = {t["name"] for t in domain.tools}
    user_tools = {t["name"] for t in domain.user_tools}
    state = task.get("initial_state") or {}
    setup = []
    for n, step in enumerate(state.get("initialization_actions") or []):
        side, func, args = step.get("env_type"), step.get("func_name"), step.get("arguments") or {}
        here = f"{where}: initialization action {n + 1}"
        if side not in ("assistant", "user") or not isinstance(func, str) or not isinstance(args, dict):
            raise Tau2ImportError(f"{here} is not {{env_type: assistant|user, func_name, arguments: {{...}}}}")
        if func in (agent_tools if side == "assistant" else user_tools):
            setup.append({"call": func, "args": args, **({"by": "user"} if side == "user" else {})})
        elif func in (tel.AGENT_SETUP if side == "assistant" else tel.USER_SETUP):
            setup.append({"handler": f"{HANDLERS}:{func}", "args": args})
        else:
            raise Tau2ImportError(f"{here}: {side} function {func!r} has no handler in {HANDLERS}.py")
    user_given = _user_given(where, state.get("initialization_data"), domain)
    history = _history(where, state.get("message_history") or [], agent_tools)
    actions = []
    for n, action in enumerate(criteria.get("actions") or []):
        name, args = action.get("name") if isinstance(action, dict) else None, (action or {}).get("arguments", {})
        who = (action or {}).get("requestor") or "assistant"
        if not isinstance(name, str) or not isinstance(args, dict) or who not in ("assistant", "user"):
            raise Tau2ImportError(f"{where}: action {n + 1} is not {{name: <tool>, arguments: {{...}}, "
                                  "requestor: assistant|user}")
        if name not in (agent_tools if who == "assistant" else user_tools):
            raise Tau2ImportError(f"{where}: action {n + 1} calls {name!r}, which is not a "
                                  f"{'' if who == 'assistant' else 'user '}tool of this domain")
        compare = action.get("compare_args")
        actions.append((name, args, who, None if compare is None else [str(c) for c in compare]))
    assertions = []
    for n, check in enumerate(criteria.get("env_assertions") or []):
        side, func, args = check.get("env_type"), check.get("func_name"), check.get("arguments") or {}
        if func not in (tel.AGENT_ASSERTIONS if side == "assistant" else tel.USER_ASSERTIONS):
            raise Tau2ImportError(f"{where}: env assertion {n + 1}: {side} function {func!r} has no assertion in "
                                  f"{HANDLERS}.py")
        if check.get("assert_value", True) is not True:
            raise Tau2ImportError(f"{where}: env assertion {n + 1} expects {func} to be false, which cannot be "
                                  "imported yet")
        assertions.append((str(func), dict(args)))
    purpose = (task.get("description") or {}).get("purpose") if isinstance(task.get("description"), dict) else None
    return TelecomTask(
        raw_id=tid, id=telecom_task_id(tid), instructions=_instructions(task), reward_basis=[str(b) for b in basis],
        setup=setup, user_given=user_given, history=history, actions=actions, assertions=assertions,
        communicate_info=[str(i) for i in criteria.get("communicate_info") or []],
        nl_assertions=[str(a) for a in criteria.get("nl_assertions") or []],
        purpose=str(purpose) if purpose else None,
    )


def _user_given(where: str, data: Any, domain: TelecomDomain) -> list[dict[str, Any]]:
    """τ²'s ``initialization_data``: its ``user_data`` merged over the phone and surroundings (the
    fields it changes, as ``update`` ops); ``agent_data`` cannot be said yet."""
    if not data:
        return []
    if data.get("agent_data"):
        raise Tau2ImportError(f"{where}: initialization_data.agent_data cannot be imported yet")
    user = data.get("user_data") or {}
    ops = []
    for part, (table, key) in (("device", tel.DEVICE), ("surroundings", tel.SURROUNDINGS)):
        if part in user:
            before = domain.user_data[part]
            after = _merge(before, user[part])
            changed = {k: v for k, v in after.items() if before.get(k) != v}
            if changed:
                ops.append({"update": {"table": table, "key": key, "set": changed}})
    unknown = sorted(set(user) - {"device", "surroundings"})
    if unknown:
        raise Tau2ImportError(f"{where}: initialization_data.user_data has {unknown[0]!r}; expected device, "
                              "surroundings")
    return ops


def _history(where: str, messages: list[Any], agent_tools: set[str]) -> list[dict[str, Any]]:
    """τ²'s ``message_history``: user and assistant messages (an assistant's tool calls as
    ``calls``; the tool messages are made again when the calls run)."""
    out: list[dict[str, Any]] = []
    for n, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role == "tool":
            continue
        if role not in ("user", "assistant"):
            raise Tau2ImportError(f"{where}: message_history[{n}] has role {role!r}; expected user, assistant, tool")
        calls = message.get("tool_calls") or []
        if role == "user" and calls:
            raise Tau2ImportError(f"{where}: message_history[{n}]: a user's tool calls in the history cannot be "
                                  "imported yet")
        entry: dict[str, Any] = {"role": "user" if role == "user" else "agent", "say": message.get("content") or ""}
        last = out[-1] if out else None
        if last is not None and last["role"] == entry["role"] == "agent" and not last["say"] and last.get("calls") \
                and not calls:  # τ²'s tool-call message, then the text of the same turn: one agent message
            last["say"] = entry["say"]
            continue
        if calls:
            for call in calls:
                if call.get("name") not in agent_tools:
                    raise Tau2ImportError(f"{where}: message_history[{n}] calls {call.get('name')!r}, which is not "
                                          "a tool of this domain")
            entry["calls"] = [{"call": c["name"], "args": c.get("arguments") or {}} for c in calls]
        out.append(entry)
    return out


# -- writing -------------------------------------------------------------------------------------


def _flow(value: Mapping[str, Any]) -> str:
    """A flow mapping of plain keys and JSON values: ``{call: x, args: {...}, when: {...}}``."""
    return "{" + ", ".join(f"{_name(k)}: {_q(v) if not isinstance(v, str) or k != 'call' else _name(v)}"
                           for k, v in value.items()) + "}"


def _about(split: str, task: TelecomTask) -> str:
    text = f"τ² telecom task {task.raw_id} ({split} split); reward basis: {', '.join(task.reward_basis)}."
    if task.purpose:
        text += f" Purpose: {task.purpose.strip()}"
    return text


def _matcher(name: str, args: dict[str, Any], who: str, compare: list[str] | None) -> dict[str, Any]:
    """τ²'s gold action as a ``called`` matcher: ``compare_args`` None compares every argument,
    ``[]`` none, a list those named."""
    shown = args if compare is None else {k: v for k, v in args.items() if k in compare}
    out: dict[str, Any] = {"tool": name}
    if shown:
        out["args"] = shown
    if who == "user":
        out["by"] = "user"
    return out


def _instruction(name: str, args: Mapping[str, Any]) -> tuple[str, str]:
    """The words that ask for a user action and the pattern the user waits for: from
    :data:`INSTRUCTIONS`, or for an action that is not there, its tool's name (a user action with
    arguments no instruction lists, such as ``set_apn_settings``, is made with the gold's)."""
    for tool, known, words, pattern in INSTRUCTIONS:
        if tool == name and known == dict(args):
            return words, pattern
    shown = f" with {', '.join(f'{k}={v!r}' for k, v in args.items())}" if args else ""
    return f"use {name}{shown}", rf"\b{re.escape(name)}\b"


def ask(name: str, args: Mapping[str, Any]) -> str:
    """What the reference says to have the caller make one user action."""
    return f"Please {_instruction(name, args)[0]} on your phone, and tell me when it is done."


def _followed(user_tools: Sequence[Mapping[str, Any]]) -> list[tuple[str, dict[str, Any], str]]:
    """The instructions of :data:`INSTRUCTIONS` this domain's phone can follow: its tool is one of
    ``user_tools``, each argument in its parameter's ``enum`` when it has one."""
    tools = {t["name"]: (t.get("parameters") or {}).get("properties") or {} for t in user_tools}
    return [(name, args, pattern) for name, args, _, pattern in INSTRUCTIONS if name in tools and all(
        key in tools[name] and value in tools[name][key].get("enum", [value]) for key, value in args.items())]


def user_script(task: TelecomTask, user_tools: Sequence[Mapping[str, Any]]) -> list[str | dict[str, Any]]:
    """The scripted user's lines: the opening (unless the history ends with the user's message),
    then a call line per gold user action, in τ²'s order, then one per other instruction of
    :data:`INSTRUCTIONS` the phone's tools (``user_tools``) can follow; each waits for an agent
    reply that asks for it. Before a gold action the task makes again, a line that says
    :data:`USER_NEXT` once the user has made it and is asked for it: the request that makes the
    first ends the user's turn there, so that one request is one call. What the user says after
    acting, or when asked nothing it can do, is the task's ``say_unknown`` (:data:`USER_NEXT`)."""
    opens = not (task.history and task.history[-1]["role"] == "user")
    lines: list[str | dict[str, Any]] = [OPENING_LINE] if opens else []
    done: list[tuple[str, dict[str, Any]]] = []
    for name, args, who, _ in task.actions:
        if who != "user":
            continue
        pattern = _instruction(name, args)[1]
        if (name, args) in done:
            lines.append({"say": USER_NEXT, "when": {"reply_matches": pattern, "user_called": [name]}})
        lines.append({"call": name, "args": args, "when": {"reply_matches": pattern}})
        done.append((name, args))
    lines += [{"call": name, "args": args, "when": {"reply_matches": pattern}}
              for name, args, pattern in _followed(user_tools) if (name, args) not in done]
    return lines if opens else [*lines, USER_NEXT]  # a plain line to start from: validate asks for one


def reference_reply(task: TelecomTask) -> str:
    """The reference's last reply: every ``communicate_info`` string (τ²'s gold replay says nothing)."""
    if task.communicate_info:
        return "Here is what you asked for: " + "; ".join(task.communicate_info) + "."
    return "Done. Is there anything else?"


def played_actions(task: TelecomTask, actions: Sequence[tuple[str, dict[str, Any], str]] | None = None
                   ) -> list[dict[str, Any]]:
    """The agent's reference that plays ``actions`` ((name, args, requestor) each; None: the task's
    gold actions): the agent's calls, and for each user action its request (:func:`ask`), one a
    turn; it ends with :func:`reference_reply`. The user's side is the task's own script
    (:func:`user_script`), the same whatever the agent says."""
    if actions is None:
        actions = [(name, args, who) for name, args, who, _ in task.actions]
    reference: list[dict[str, Any]] = [{"call": n, "args": a} if who == "assistant" else {"say": ask(n, a)}
                                       for n, a, who in actions]
    reference.append({"say": reference_reply(task)})
    return reference


def _task_lines(split: str, task: TelecomTask, user_tools: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = [f"  - id: {_q(task.id)}", f"    description: {_q(_about(split, task))}"]
    if task.user_given:
        lines.append("    user_given:")
        lines += [f"      - {_q(op)}" for op in task.user_given]
    if task.setup:
        lines.append("    setup:")
        lines += [f"      - {_flow(step)}" for step in task.setup]
    if task.history:
        lines.append("    history:")
        lines += [f"      - {_q(m)}" for m in task.history]
    script = [_q(line) if isinstance(line, str) else _flow(line) for line in user_script(task, user_tools)]
    reference = [_flow(step) for step in played_actions(task)]
    lines += ["    user:", f"      instructions: {_q(task.instructions)}", f"      say_unknown: {_q(USER_NEXT)}"]
    if script:
        lines.append("      script:")
        lines += [f"        - {line}" for line in script]
    lines.append("    expect:")
    kinds = []
    if "DB" in task.reward_basis:
        lines.append("      world_matches_reference: true")
        kinds.append("state")
    if task.communicate_info:
        lines.append(f"      reply_includes: {_q(task.communicate_info)}")
        kinds.append("reply")
    if task.actions:
        lines.append("      called:")
        lines += [f"        - {_q(_matcher(*a))}" for a in task.actions]
        kinds.append("called")
    if task.assertions:
        lines.append("      assert:")
        lines += [f"        - {_q({'function': f'{HANDLERS}:{f}', **({'args': a} if a else {})})}"
                  for f, a in task.assertions]
        kinds.append("assert")
    basis = [BASIS[b] for b in task.reward_basis if b in BASIS and BASIS[b] in kinds]
    if not basis:
        raise Tau2ImportError(f"task {task.raw_id!r}: reward basis {', '.join(task.reward_basis)} leaves nothing "
                              "this import can grade")
    lines.append(f"      basis: {_q(basis)}")
    if task.nl_assertions:
        lines.append("    judge:")
        lines += [f"      nl-assertion-{n}: {_q(judge_question(a))}" for n, a in enumerate(task.nl_assertions, 1)]
    lines.append("    reference:")
    lines += [f"      - {step}" for step in reference]
    return lines


def _table_lines(name: str, key: str, rows: list[dict[str, Any]]) -> list[str]:
    seen: dict[str, None] = {key: None}
    for row in rows:
        seen.update(dict.fromkeys(row))
    out = [f"  {name}:", f"    key: {key}", f"    fields: {_q(list(seen))}", "    rows:"]
    return out + [f"      - {_q(row)}" for row in rows]


def domain_text(domain: TelecomDomain) -> str:
    out = [
        "# Imported from τ²-bench by `python -m pytest_sandtable import tau2`; see docs/import.md.",
        "version: 1",
        "name: tau2-telecom",
        f"description: {_q(f'τ²-bench telecom domain ({domain.split} split), imported: dual control.')}",
        f"policy: {_block(domain.policy, '  ')}",
        f"clock: {{now: {_q(TELECOM_NOW)}}}",
        "world:",
    ]
    for table, key in tel.AGENT_TABLES.items():
        out += _table_lines(table, key, domain.data[table])
    out.append("user_world:")
    for (table, row_key), part in ((tel.DEVICE, "device"), (tel.SURROUNDINGS, "surroundings")):
        out += _table_lines(table, tel.USER_TABLES[table], [{"id": row_key, **domain.user_data[part]}])
    out.append("tools:")
    for tool in domain.tools:
        out += _tool_lines("telecom", tool)
    out.append("user_tools:")
    for tool in domain.user_tools:
        out += _tool_lines("telecom", tool)
    out.append(f"sync: {HANDLERS}:sync")
    out.append("tasks:")
    for task in domain.tasks:
        out += _task_lines(domain.split, task, domain.user_tools)
    return "\n".join(out) + "\n"


def import_telecom(path: Path, out: Path, split: str, force: bool = False,
                   source: Path | None = None) -> ImportResult:
    domain = read_telecom(path, split, source)
    check_out(out, force, Tau2ImportError)
    text = domain_text(domain)
    _check_round_trip(domain, text)
    handler = write_import(out, f"{HANDLERS}.py", text)
    rows = {t: len(r) for t, r in domain.data.items()}
    rows.update({tel.DEVICE[0]: 1, tel.SURROUNDINGS[0]: 1})
    return ImportResult(out / DOMAIN_FILE, handler, len(domain.tools) + len(domain.user_tools), len(domain.tasks),
                        rows)


def _check_round_trip(domain: TelecomDomain, text: str) -> None:
    import yaml

    loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    doc = yaml.load(text, Loader=loader)
    back = {name: spec["rows"] for name, spec in doc["world"].items()}
    user_back = {part: {k: v for k, v in doc["user_world"][table]["rows"][0].items() if k != "id"}
                 for (table, _), part in ((tel.DEVICE, "device"), (tel.SURROUNDINGS, "surroundings"))}
    if (_typed(back) != _typed(domain.data) or _typed(user_back) != _typed(domain.user_data)
            or doc["policy"] != domain.policy):
        raise Tau2ImportError(f"{domain.path}: the data does not survive being written as YAML; please report this")


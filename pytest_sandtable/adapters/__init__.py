"""Agents and simulated users behind a spec: Claude (``claude:``), OpenAI-compatible
endpoints (``openai:``), HTTP step services (``http(s)://``) and the team's own
``module:attr``; :mod:`.registry` parses every spec in one place.

Nothing here is imported by the plugin at start-up: :func:`.registry.make_agent`
and :func:`.registry.make_user` import an adapter module only when a spec names it,
so ``anthropic`` and ``httpx`` are loaded only by runs that use them.

May import: :mod:`pytest_sandtable.engine` and :mod:`pytest_sandtable.domain`.
Never pytest, never :mod:`pytest_sandtable.report`.
"""

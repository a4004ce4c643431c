"""Model-backed agents and simulated users (Claude, OpenAI-compatible, HTTP step services).

Nothing here is imported by the plugin at start-up: :func:`pytest_sandtable._agents.make_agent`
and :func:`pytest_sandtable._users.make_user` import an adapter module only when a spec names it,
so ``anthropic`` and ``httpx`` are loaded only by runs that use them.
"""

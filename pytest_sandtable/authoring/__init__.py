"""Authoring: draft a domain from SOP notes (``init``) and review what was drafted
(``review``).

:mod:`.notes` reads the notes and finds text a draft copied from them, :mod:`.draft`
plans a draft, asks a model for it and repairs it until it validates, :mod:`.review`
accepts, edits and rejects the drafted items (``pending: true``) in place, editing
the file's text where the item is so that everything else stays as it was.

Sits above ``adapters`` (which reach the models) and below ``cli``; never imported
by the pytest plugin.
"""

"""Making values safe to show: a URL or agent spec without the credentials it may carry."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def public_url(url: str) -> str:
    """The URL without user, password, query or fragment (they may hold keys): safe to
    show in output, results and reports."""
    try:
        p = urlsplit(url)
    except ValueError:
        return "[redacted]"
    return urlunsplit((p.scheme, p.netloc.rpartition("@")[2], p.path, "", ""))


def public_spec(spec: str) -> str:
    """An agent or user spec as it may be shown: an http(s) URL loses its credentials."""
    return public_url(spec) if spec.startswith(("http://", "https://")) else spec

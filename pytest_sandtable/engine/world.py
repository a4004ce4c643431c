"""The world a trial runs against: seed tables shared by every trial, plus a
per-trial overlay of what the trial changed.

Starting a trial copies nothing: a fresh :class:`World` is an empty overlay
over the shared :class:`Seed`. Reads look in the overlay first; writes put a
new row dict into the overlay (seed rows are never mutated). Equality lookups
on tables use hash indexes built once per seed and field, so a tool that
lists `loads where origin = X` costs what it matches, not the table's size.
"""

from __future__ import annotations

import copy
import marshal
import operator
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from ..domain.conditions import as_number, is_operator_object, row_matches, test
from ..domain.model import Domain, Table
from .kept import KeptPer

# tables smaller than this are scanned. An index is built once per seed and field and
# serves every trial after, so it pays for itself on a table of a few rows already (a
# lookup in it costs less than matching each row); only an empty seed table is scanned
_INDEX_MIN_ROWS = 1


_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})


def copy_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a row that shares nothing mutable with it. Rows are mostly scalars,
    so this is much cheaper than copy.deepcopy; nested values are deep-copied."""
    out = dict(row)
    if _SCALAR_TYPES.issuperset(map(type, out.values())):  # scalars only, as most rows are: the whole copy
        return out
    try:  # JSON values, as rows hold: copied by marshal in C (format 2 shares no sub-object)
        copied: dict[str, Any] = marshal.loads(marshal.dumps(out, 2))
        return copied
    except (ValueError, TypeError, RecursionError):  # a value marshal cannot take (a date from YAML)
        return {k: v if type(v) in _SCALAR_TYPES else copy.deepcopy(v) for k, v in out.items()}


def norm_key(v: Any) -> Any:
    """Row keys compare like values: 100101, "100101" and 100101.0 are one key."""
    if type(v) is str:  # most keys, as they are
        return v
    if isinstance(v, bool):
        return v
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, (int, float)):
        return str(v)
    return v


# a text starting with one of these is no number (as_number needs a space, sign, dot or digit first)
_NOT_NUMBER_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_#$%&@!?*/\\|~^<>()[]{}:;,'\"")


def _index_key(v: Any) -> Any:
    """A hashable form of a field value under the spec's equality (numeric for numbers)."""
    if type(v) is str and v and v[0] in _NOT_NUMBER_START:  # most texts, without the number test
        return ("s", v)
    if isinstance(v, bool):
        return ("b", v)
    n = as_number(v)
    if n is not None:
        return ("n", n)
    if isinstance(v, str):
        return ("s", v)
    if v is None:
        return ("z", None)
    return None  # lists and objects are not indexed


# a path into a row's nested mappings: ("address", "zip") reads row["address"]["zip"]
Path = tuple[str, ...]
_ABSENT: Any = object()


def at_path(row: Mapping[str, Any], path: Path) -> Any:
    """The value at ``path`` in ``row``, or ``_ABSENT`` when a step is missing or
    not a mapping."""
    value: Any = row
    for step in path:
        if not isinstance(value, Mapping) or step not in value:
            return _ABSENT
        value = value[step]
    return value


def _eq_key(cond: Any) -> Any:
    """The index key a condition's equality looks up (a literal, or an operator
    object's ``eq``), or None when it has none to look up."""
    if type(cond) is str and cond and cond[0] in _NOT_NUMBER_START:  # _index_key's first case
        return ("s", cond)
    if isinstance(cond, dict):  # an operator object's `eq`; nothing else is looked up
        if not is_operator_object(cond) or "eq" not in cond:
            return None
        cond = cond["eq"]
        if is_operator_object(cond):
            return None
    return _index_key(cond)


def _ieq_key(cond: Any) -> str | None:
    """The lowercased text an operator object's ``ieq`` looks up, or None."""
    if type(cond) is dict and "ieq" in cond and is_operator_object(cond):
        want = cond["ieq"]
        return want.lower() if isinstance(want, str) else None
    return None


def _with_paths(paths: list[tuple[Path, Any]]) -> Any:
    def ok(row: Mapping[str, Any], where: Mapping[str, Any]) -> bool:
        return row_matches(row, where) and paths_match(row, paths)
    return ok


def paths_match(row: Mapping[str, Any], paths: list[tuple[Path, Any]]) -> bool:
    """Does a row satisfy conditions on paths into its nested mappings (an absent
    path is an absent field)?"""
    for path, cond in paths:
        value = at_path(row, path)
        if not test(None if value is _ABSENT else value, cond, value is not _ABSENT):
            return False
    return True


class SeedTable:
    """One table's seed rows, read-only, with lazily built per-field indexes."""

    def __init__(self, table: Table) -> None:
        self.name = table.name
        self.key = table.key
        self.key_format = table.key_format
        self.rows: dict[Any, dict[str, Any]] = {}
        for row in table.rows:
            self.rows[norm_key(row[table.key])] = row
        self.position = {k: i for i, k in enumerate(self.rows)}
        self._indexes: dict[str | Path, dict[Any, list[Any]]] = {}
        self._lower_indexes: dict[str | Path, dict[str, list[Any]]] = {}
        self._value_counts: dict[str, Counter[Any]] = {}

    def index(self, field: str | Path) -> dict[Any, list[Any]]:
        """Seed keys by the index key of a field's value (or of the value at a path into
        nested mappings, for a handler's ``world.list``), in seed order."""
        idx = self._indexes.get(field)
        if idx is None:
            idx = {}
            for k, row in self.rows.items():
                if isinstance(field, str):
                    if field not in row:
                        continue
                    value = row[field]
                else:
                    value = at_path(row, field)
                    if value is _ABSENT:
                        continue
                ik = _index_key(value)
                if ik is not None:
                    idx.setdefault(ik, []).append(k)
            self._indexes[field] = idx
        return idx

    def lower_index(self, field: str | Path) -> dict[str, list[Any]]:
        """Seed keys by a text field's value lowercased (what ``ieq`` compares), in seed order."""
        idx = self._lower_indexes.get(field)
        if idx is None:
            idx = {}
            for k, row in self.rows.items():
                value = row.get(field, _ABSENT) if isinstance(field, str) else at_path(row, field)
                if isinstance(value, str):
                    idx.setdefault(value.lower(), []).append(k)
            self._lower_indexes[field] = idx
        return idx

    def value_counts(self, field: str) -> Counter[Any]:
        """How often each value of a field occurs in the seed (for never_disclose)."""
        c = self._value_counts.get(field)
        if c is None:
            c = Counter(_index_key(r[field]) for r in self.rows.values() if field in r)
            c.pop(None, None)
            self._value_counts[field] = c
        return c


class Seed:
    """All of a domain's seed tables. Built once per domain and shared by its trials."""

    def __init__(self, domain: Domain) -> None:
        self.tables = {name: SeedTable(t) for name, t in domain.tables.items()}
        for name, t in domain.user_tables.items():  # dual control: the user world's tables too
            self.tables[name] = SeedTable(t)


_SEEDS: KeptPer[Domain, Seed] = KeptPer(Seed)


def seed_for(domain: Domain) -> Seed:
    """The shared seed of a domain (kept for the process)."""
    return _SEEDS(domain)


Savepoint = tuple[dict[str, dict[Any, dict[str, Any]]], dict[str, list[Any]]]


class FieldValues:
    """The values a field holds right now, as :meth:`World.field_values` gives them,
    without copying the seed's counts: built from this trial's changes alone, so it
    costs what the trial changed, not the table's size.

    Iterating ``field_values`` gives the seed's values in seed order (less those the
    changes took away), then the values the changes added, in the order added (a
    seed value taken away and added back moves there too); :meth:`tail` are those.
    """

    def __init__(self, st: SeedTable, field: str, changed: Mapping[Any, Mapping[str, Any]]) -> None:
        self.seed = st.value_counts(field)
        self._now: dict[Any, int] = {}  # counts of the values the changes touched
        self._tail: dict[Any, None] = {}  # values added after the seed's, in order
        seed, now, tail = self.seed, self._now, self._tail
        # what field_values() does to its copy of the seed's Counter, step by step
        for k, row in changed.items():
            old = st.rows.get(k)
            if old is not None and field in old:
                ik = _index_key(old[field])
                n = (now[ik] if ik in now else seed.get(ik, 0)) - 1
                now[ik] = max(n, 0)
                if n <= 0:
                    tail.pop(ik, None)
            if field in row:
                ik = _index_key(row[field])
                if ik is not None:
                    n = now[ik] if ik in now else seed.get(ik, 0)
                    now[ik] = n + 1
                    if n <= 0:  # not there: added at the end
                        tail[ik] = None

    def __contains__(self, ik: Any) -> bool:
        n = self._now.get(ik)
        return n > 0 if n is not None else ik in self.seed

    def in_seed_order(self, ik: Any) -> bool:
        """Is this seed value still there, in its seed place?"""
        return ik in self and ik not in self._tail and ik in self.seed

    def tail(self) -> list[Any]:
        """The values added after the seed's, in order."""
        return list(self._tail)


class NotFound(Exception):
    pass


# A deleted row's place in the overlay: an empty row under the deleted key. Because it
# is a row with no fields, field counts see the old value gone without a special case;
# every read that yields rows skips it by identity.
_GONE: dict[str, Any] = {}


class Conflict(Exception):
    pass


class World:
    """One trial's world: the seed plus this trial's changes."""

    def __init__(self, seed: Seed) -> None:
        self.seed = seed
        # table -> key -> row; a row here replaces the seed row of the same key
        self._changed: dict[str, dict[Any, dict[str, Any]]] = {name: {} for name in seed.tables}
        # table -> keys of rows created in this trial, in order
        self._created: dict[str, list[Any]] = {name: [] for name in seed.tables}

    # -- reads --------------------------------------------------------------

    def get(self, table: str, key: Any) -> dict[str, Any] | None:
        """The row with this key, or None. Do not mutate the returned dict."""
        k = key if type(key) is str else norm_key(key)  # a text is its own key
        row = self._changed[table].get(k)
        if row is None:
            return self.seed.tables[table].rows.get(k)
        return None if row is _GONE else row

    def untouched(self, table: str) -> bool:
        """Whether this trial has changed nothing in a table (its rows are the seed's)."""
        return not self._changed[table]

    def field_as_seeded(self, table: str, field: str) -> bool:
        """Whether every row of a table holds in ``field`` (and in its key field) the very
        value its seed row holds, and the trial has added or deleted no row: what reads
        that field alone (its values, the keys of the rows holding one) reads the seed's.
        An update that leaves the field alone keeps its value object (it copies the row),
        so this costs the rows the trial changed; an equal value written anew says no."""
        changed = self._changed[table]
        if not changed:
            return True
        if self._created[table]:
            return False
        st = self.seed.tables[table]
        seeded, key = st.rows, st.key
        for k, row in changed.items():
            old = seeded.get(k)
            if old is None or row is _GONE or row.get(key) is not old.get(key):
                return False
            if field in old:
                if field not in row or row[field] is not old[field]:
                    return False
            elif field in row:
                return False
        return True

    def count(self, table: str) -> int:
        changed = self._changed[table]
        gone = sum(1 for r in changed.values() if r is _GONE) if changed else 0
        return len(self.seed.tables[table].rows) + len(self._created[table]) - gone

    def rows(self, table: str) -> Iterator[dict[str, Any]]:
        """Every row of a table, seed order first, then rows created in this trial."""
        st = self.seed.tables[table]
        changed = self._changed[table]
        if not changed:
            yield from st.rows.values()
        else:
            for k, row in st.rows.items():
                now = changed.get(k, row)
                if now is not _GONE:
                    yield now
        for k in self._created[table]:
            if changed[k] is not _GONE:
                yield changed[k]

    def select(self, table: str, where: Mapping[str, Any], limit: int | None = None,
               paths: list[tuple[Path, Any]] | None = None) -> list[dict[str, Any]]:
        """Rows matching a resolved where clause (and ``paths``, conditions on paths into
        nested mappings), in table order. An equality on a field or a path is looked up
        in the seed's index."""
        st = self.seed.tables[table]
        changed = self._changed[table]
        if not changed and not st.rows:  # a table with no rows yet (a log nobody wrote to)
            return []
        eq_field: Any = None  # a field, or a path
        eq_key: Any = None
        lower: Any = None  # (field or path, text) of an `ieq`, looked up when there is no equality
        by_lower = False
        if len(st.rows) >= _INDEX_MIN_ROWS:
            for f, cond in where.items() if not paths else [*where.items(), *paths]:
                eq_key = _eq_key(cond)
                if eq_key is not None:
                    eq_field = f
                    break
                if lower is None:
                    text = _ieq_key(cond)
                    if text is not None:
                        lower = (f, text)
            if eq_field is None and lower is not None:
                (eq_field, eq_key), by_lower = lower, True
        ok = row_matches if not paths else _with_paths(paths)
        if eq_field is None:
            # no clause (a handler listing a whole table): every row, without a test per row
            every = st.rows.values() if not changed else self.rows(table)  # a table as seeded: its rows
            out = list(every) if not where and not paths else [r for r in every if ok(r, where)]
            return out[:limit] if limit is not None else out
        # seed candidates from the index (in seed order), then every row this trial touched
        candidates = (st.lower_index(eq_field) if by_lower else st.index(eq_field)).get(eq_key, ())
        if not changed:
            out = [row for row in map(st.rows.__getitem__, candidates) if ok(row, where)]
            return out[:limit] if limit is not None else out
        found: list[tuple[int, dict[str, Any]]] = []
        for k in candidates:
            if k in changed:
                continue
            row = st.rows[k]
            if ok(row, where):
                found.append((st.position[k], row))
        base = len(st.rows)
        created_pos = {k: base + i for i, k in enumerate(self._created[table])}
        for k, row in changed.items():
            if row is not _GONE and ok(row, where):
                found.append((st.position[k] if k in st.position else created_pos[k], row))
        found.sort(key=_first)
        out = [r for _, r in found]
        return out[:limit] if limit is not None else out

    def field_values(self, table: str, field: str) -> Counter[Any]:
        """Index keys of every value a field holds right now (seed adjusted by changes)."""
        st = self.seed.tables[table]
        counts = st.value_counts(field)
        changed = self._changed[table]
        if not changed:
            return counts
        counts = counts.copy()
        for k, row in changed.items():
            old = st.rows.get(k)
            if old is not None and field in old:
                ik = _index_key(old[field])
                counts[ik] -= 1
                if counts[ik] <= 0:
                    del counts[ik]
            if field in row:
                ik = _index_key(row[field])
                if ik is not None:
                    counts[ik] += 1
        return counts

    def field_view(self, table: str, field: str) -> FieldValues:
        """The values a field holds right now (what :meth:`field_values` counts), at the
        cost of this trial's changes to the table, not of its size."""
        return FieldValues(self.seed.tables[table], field, self._changed[table])

    def keys_with_value(self, table: str, field: str, value: Any) -> list[Any]:
        """Keys of rows whose field equals a value (for naming the record in a detail)."""
        return [r[self.seed.tables[table].key] for r in self.select(table, {field: value}, limit=3)]

    # -- writes -------------------------------------------------------------

    def next_key(self, table: str) -> str:
        st = self.seed.tables[table]
        fmt = st.key_format or "{n}"
        n = self.count(table) + 1
        changed, seeded = self._changed[table], st.rows
        while True:
            key = fmt.replace("{n}", str(n))  # a text: its own key (norm_key)
            # no row's key, and no deleted row's (as a database's sequence would not give it again)
            if key not in changed and key not in seeded:
                return key
            n += 1

    def create(self, table: str, row: dict[str, Any]) -> dict[str, Any]:
        return self.create_own(table, copy_row(row))

    def create_own(self, table: str, row: dict[str, Any]) -> dict[str, Any]:
        """:meth:`create` of a row made for the world alone: nothing else holds it or any
        mutable value in it (a tool's row of scalars, built on the call), so the world
        keeps it as it is, without the copy :meth:`create` makes. Its key is set in it."""
        st = self.seed.tables[table]
        if row.get(st.key) is None:
            # a key next_key gives is no row's, now or deleted: nothing to look up again
            k = row[st.key] = self.next_key(table)
            self._created[table].append(k)
            self._changed[table][k] = row
            return row
        k = norm_key(row[st.key])
        if self.get(table, k) is not None:
            raise Conflict(f"{table} {row[st.key]} already exists")
        created = self._created[table]
        if self._changed[table].get(k) is _GONE:
            # a deleted key made again: a seed key keeps its seed place (the diff shows
            # a change), a key created in this trial moves to the end as a new row
            if k not in st.rows:
                created.remove(k)
                created.append(k)
        else:
            created.append(k)
        self._changed[table][k] = row
        return row

    def update(self, table: str, key: Any, values: Mapping[str, Any]) -> dict[str, Any]:
        old = self.get(table, key)
        if old is None:
            raise NotFound(f"{table} {key} not found")
        return self.rewrite(table, key, old, values)

    def rewrite(self, table: str, key: Any, old: Mapping[str, Any], values: Mapping[str, Any], *,
                own: bool = False) -> dict[str, Any]:
        """:meth:`update` of the row ``old`` the caller has just read with ``get(table, key)``
        (not looked up again). ``own``: ``values`` were made for the world alone (nothing
        else holds them or anything in them), so they are kept without a copy."""
        row = dict(old)
        row.update(values if own else copy_row(values))
        self._changed[table][norm_key(key)] = row
        return row

    def delete(self, table: str, key: Any) -> dict[str, Any]:
        """Delete the row with this key; returns the row as it was. Raises NotFound when
        there is none. The overlay keeps a tombstone, so reads, savepoints and the diff
        see the row gone while the seed stays untouched."""
        old = self.get(table, key)
        if old is None:
            raise NotFound(f"{table} {key} not found")
        self._changed[table][norm_key(key)] = _GONE
        return copy_row(old)

    # -- transactions -------------------------------------------------------

    def savepoint(self) -> Savepoint:
        """Cheap: the overlay holds only this trial's changes, and rows are replaced, never
        mutated; a table the trial has not changed is left out (it reads as empty)."""
        changed = {t: dict(c) for t, c in self._changed.items() if c}
        return changed, {t: list(c) for t, c in self._created.items() if c}

    def rollback(self, sp: Savepoint) -> None:
        changed, created = sp
        self._changed = {t: dict(changed[t]) if t in changed else {} for t in self._changed}
        self._created = {t: list(created[t]) if t in created else [] for t in self._created}

    # -- diff ---------------------------------------------------------------

    def diff(self, since: Savepoint | None = None) -> dict[str, list[dict[str, Any]]]:
        """Rows created, fields changed with before and after, and rows deleted, since a
        savepoint (the start of the trial, after the task's `given`) or since the seed.
        ``deleted`` is there only when rows were deleted (results from before it lack it)."""
        base_changed, base_created = since if since is not None else ({}, {})
        created: list[dict[str, Any]] = []
        changed: list[dict[str, Any]] = []
        deleted: list[dict[str, Any]] = []
        for table, rows in self._changed.items():
            if not rows:  # untouched by this trial (a created row is a changed one too)
                continue
            st = self.seed.tables[table]
            key = st.key
            made = self._created[table]
            before_new = base_created.get(table)
            # the keys created since the savepoint (None: every key created in the trial)
            new_keys = set(made).difference(before_new) if before_new else None
            for k in made:
                if new_keys is None or k in new_keys:
                    row = rows[k]
                    if row is not _GONE:
                        created.append({"table": table, "key": row[key], "row": copy_row(row)})
            # every row changed is one created since (a table of new rows): no row to compare
            if new_keys is None:
                if len(made) == len(rows):
                    continue
                new_keys = set(made)
            elif len(new_keys) == len(rows):
                continue
            before_rows = base_changed.get(table, _NO_ROWS)
            for k, row in rows.items():
                if k in new_keys:
                    continue
                old = before_rows[k] if k in before_rows else st.rows.get(k)
                if old is row:
                    continue
                if old is None or old is _GONE:  # gone at the savepoint, made again since
                    created.append({"table": table, "key": row[st.key], "row": copy_row(row)})
                elif row is _GONE:
                    deleted.append({"table": table, "key": old[st.key], "row": copy_row(old)})
                else:
                    fields = _changed_fields(old, row)
                    if fields:
                        changed.append({"table": table, "key": row[st.key], "fields": fields})
        out = {"created": created, "changed": changed}
        if deleted:
            out["deleted"] = deleted
        return out

    def touched(self) -> list[tuple[str, Any]]:
        """(table, key) of every row :meth:`diff` (since the seed) names, in its order
        (created, changed, deleted), without copying a row or listing its fields."""
        created: list[tuple[str, Any]] = []
        changed: list[tuple[str, Any]] = []
        deleted: list[tuple[str, Any]] = []
        for table, rows in self._changed.items():
            if not rows:
                continue
            st = self.seed.tables[table]
            key = st.key
            made = self._created[table]
            for k in made:
                row = rows[k]
                if row is not _GONE:
                    created.append((table, row[key]))
            if len(made) == len(rows):
                continue
            new_keys = set(made)
            for k, row in rows.items():
                if k in new_keys:
                    continue
                old = st.rows.get(k)
                if old is row:
                    continue
                if old is None or old is _GONE:
                    created.append((table, row[key]))
                elif row is _GONE:
                    deleted.append((table, old[key]))
                elif _differs(old, row):
                    changed.append((table, row[key]))
        return created + changed + deleted


def _differs(old: Mapping[str, Any], row: Mapping[str, Any]) -> bool:
    """Whether :func:`_changed_fields` finds a field that differs."""
    return row.keys() != old.keys() or any(old[f] != v for f, v in row.items())


_first = operator.itemgetter(0)
_NO_ROWS: dict[Any, dict[str, Any]] = {}  # a table the savepoint holds no changes of


def _changed_fields(old: Mapping[str, Any], row: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The fields that differ, by name (an update changes a few of a row's many: only
    those are sorted)."""
    differ = [f for f, v in row.items() if f not in old or old[f] != v]
    if row.keys() != old.keys():  # fields the row no longer has (an update keeps them all)
        differ.extend(f for f in old if f not in row)
    differ.sort()
    return {f: {"before": old.get(f), "after": row.get(f)} for f in differ}

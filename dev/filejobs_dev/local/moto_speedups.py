"""Faster moto, with moto's own answers: applied by the local stack in its emulator processes,
and by the tests to their in-process moto (tests/conftest.py).

Each was found by profiling the local stack under load (py-spy on the emulator processes); each
keeps what moto answers (its test compares answers with moto's as released, and counts the work
that the speed-up avoids). The baseline of bench/local_stack.py runs without them.

Each pays, measured alone against moto without any on the workload it was made for
(bench/moto_speedups.py: CPU seconds of moto server and its client, median of 3, 2026-12-05):
routing 1.05x, queries 2.18x, serializer 3.57x, expressions 1.40x, retention 25.7x, scans
2.21x, KMS key pairs 4.20x. A seventh, a handler's methods listed once per class, measured
0.95x (median of 7) and 1.04x: it was dropped.

- Each request's service found once per host name. moto server finds the backend of every
  request by listing its own package folder on disk (an `isdir` per service, about 150) and
  trying every service's URL pattern, under one lock that all requests share: a sixth of the
  emulator's time under load (py-spy, 2026-12-01), and every request waits its turn. The answer
  depends on the host name alone and moto's services do not change while it runs, so each host
  name's backend is now found once and remembered.
- A query reads its partition, not the table. moto answers every Query, of the table or of an
  index, by listing every item of the table, sorting them all, then testing each against the
  key condition: the cost of every query grew with the table (58% of the DynamoDB emulator's
  time at 1,050 jobs, py-spy 2026-12-01; the sweep's 256 queries a run slowed with every job
  ever made). A table query now starts from the items under its partition key, and an index
  query from the items whose index key attributes hold the queried strings: the table grouped
  by them once, then kept current from the items each write request names (its Key or Item),
  so a write costs its own items, not a pass over the table. Regrouping the whole table after
  every write was 16% of the emulator's time in a 2,000-file chaos run (py-spy, 2026-12-02),
  where workers write between the sweeps' queries. A request whose items cannot be told from
  it (a table made or dropped, PartiQL) has the groups made again. moto then applies its own
  conditions, order and paging to the candidates, so the answer is the same.
  A key of another type (a number, whose "1" equals "1.0") is left to moto's own way.
- A response's members read straight from its dict. moto serializes every response by walking
  the operation's output shape, and for every member of every structure (each attribute value
  of each item is one, with ten members) it asks a chain of alias providers which keys to try,
  building an object per provider: about a fifth of the DynamoDB emulator's time under load
  (py-spy, 2026-12-02). For a plain dict the keys the chain tries depend only on the member's
  shape, its parent and its name, so they are now worked out once per member and tried in the
  same order; the value is the first that the dict holds, as moto's chain picks it. A
  structure's members are then read in one loop: the nine absent members of an attribute
  value cost a lookup each, not two calls and a chain (a third of what serializing still took,
  py-spy 2026-12-02).
- Expressions parsed once. moto parses every UpdateItem's update expression twice (the handler
  checks the names and values it uses, the backend applies it) and its condition twice alike:
  a third of an UpdateItem's time (py-spy, 2026-12-02), and a job's transitions send the same
  few expressions again and again. An update expression's tree depends on its text alone
  (moto validates and applies a deep copy of it), so each is parsed once, and the copy is made
  from its pickled form; a condition's on its text, names and values, so the backend's parse
  reuses the handler's. moto's validators also listed the classes of nodes they process by
  building a dict of bound methods for every node they visit: once per validator class now.
- A received message's retention read from its queue. For every message it hands out, moto's
  SQS checks the retention period by building every attribute of the queue, three times, and
  two of them count the queue's messages: a receive from a queue of n messages cost n times
  the batch, a sixth of the stack process's time with four pollers per queue (py-spy,
  2026-12-02). The period is now read from the queue itself, and compared the same way.
- A scan copies only what it answers with. moto's table scan makes a deep copy of every item
  it reads, then drops those its filter rejects, and a projection copies each survivor again:
  the local stack's tools ask "how many jobs are still active?" (a filtered count) every few
  seconds, and each asked for a copy of the whole table (a fifth of the DynamoDB emulator's time
  in a 2,000-file chaos run, py-spy 2026-12-02). The table's items are now read in place and
  only the answer is copied (a projection makes new items itself; a count answers none);
  index scans, whose projection works on the copy, keep moto's way.
- A KMS key's RSA key pair made when it is first used. moto makes a 2,048-bit RSA pair for every
  key it creates, symmetric ones included, which never sign: DynamoDB's default encryption key
  is one, made for each table's first moto backend, and its pair was half of what creating the
  test suite's two tables cost (cProfile, 2026-12-04). The pair is now made the first time
  the key signs, verifies or hands out its public key; until then nothing reads it."""

from __future__ import annotations

import copy
import functools
import inspect
import json
import pickle
import threading
from collections.abc import Callable, Iterable
from typing import Any

from filejobs_dev.local import moto_fixes

_state = threading.local()


class _DictMembers:
    """moto's response serializer, reading a structure's members straight from a dict.

    For every member of every structure (each attribute value of each item is one, with ten
    members) moto asks a chain of alias providers which keys to try, building an object per
    provider. For a plain dict the keys the chain tries depend only on the member's shape, its
    parent and its name, so they are worked out once per member and tried in the same order;
    a structure's members are then read in one loop, the absent ones costing a lookup each.
    """

    def __init__(self) -> None:
        # (member shape, its parent, member name) -> the keys moto's chain tries on a dict, in
        # order; None where one is a dotted path (moto would walk it): moto's own way then.
        self._tried: dict[tuple[Any, Any, str], tuple[str, ...] | None] = {}

    @staticmethod
    def plain(serializer: Any) -> bool:
        """moto's default chain of aliases, and no transformer of any value."""
        from moto.core.serialize import DEFAULT_ALIAS_PROVIDERS  # noqa: PLC0415

        picker = serializer._value_picker
        providers = getattr(picker, "alias_providers", None)
        return providers == DEFAULT_ALIAS_PROVIDERS and not picker.response_transformers

    def keys(self, serializer: Any, value: dict[str, Any], key: str, shape: Any) -> Any:
        # What the chain tries depends on the shape, its parent and the key (and on the
        # value's class, here always dict), never on the value's contents.
        memo = (shape, getattr(shape, "parent", None), key)
        if memo not in self._tried:
            self._tried[memo] = self._keys_tried(serializer, value, key, shape)
        return self._tried[memo]

    @staticmethod
    def _keys_tried(serializer: Any, value: dict[str, Any], key: str, shape: Any) -> Any:
        from moto.core.serialize import AttributePickerContext  # noqa: PLC0415

        context = AttributePickerContext(
            obj=value,
            key=key,
            shape=shape,
            operation_model=serializer.operation_model,
            service_model=serializer.operation_model.service_model,
            key_path=".".join(serializer.path),
        )
        keys = tuple(serializer._value_picker.get_possible_keys(context))
        return None if any("." in k for k in keys) else keys

    def get_value(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def get_value(serializer: Any, value: Any, key: str, shape: Any) -> Any:
            if type(value) is not dict or not self.plain(serializer):
                return original(serializer, value, key, shape)
            keys = self.keys(serializer, value, key, shape)
            if keys is None:
                return original(serializer, value, key, shape)
            return next((value[k] for k in keys if k in value), None)

        return get_value

    @staticmethod
    def _passes_scalars(serializer: type[Any]) -> bool:
        """Whether a serializer class writes strings, booleans and lists of strings as they
        are (moto's JSON serializers: `str(value)` of a str, the value of a bool)."""
        from moto.core.serialize import BaseJSONSerializer, ResponseSerializer  # noqa: PLC0415

        return (
            serializer._serialize is ResponseSerializer._serialize
            and serializer._default_serialize is ResponseSerializer._default_serialize
            and serializer._serialize_type_string is BaseJSONSerializer._serialize_type_string
            and serializer._serialize_type_list is BaseJSONSerializer._serialize_type_list
            and getattr(serializer, "_serialize_type_boolean", None) is None
        )

    @staticmethod
    def _as_is(shape: Any, value: Any) -> bool:
        """A member value that a scalar-passing serializer writes unchanged."""
        kind = shape.type_name
        if kind == "string":
            return type(value) is str
        if kind == "boolean":
            return type(value) is bool
        if kind == "list" and shape.member.type_name == "string" and type(value) is list:
            return all(type(item) is str for item in value)
        return False

    def serialize_structure(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """moto's `_serialize_type_structure` with its `_serialize_structure_member` and
        `get_value` inlined for a dict, where the serializer overrides neither; a string, a
        boolean or a list of strings is written as the JSON serializers write it (as it is)."""
        from moto.core.serialize import ResponseSerializer  # noqa: PLC0415

        member_of = ResponseSerializer._serialize_structure_member
        scalars: dict[type[Any], bool] = {}

        @functools.wraps(original)
        def serialize(serializer: Any, serialized: Any, value: Any, shape: Any, key: str) -> Any:
            inlinable = type(serializer)._serialize_structure_member is member_of
            if type(value) is not dict or not inlinable or not self.plain(serializer):
                return original(serializer, serialized, value, shape, key)
            wrapper = serializer.MAP_TYPE() if key else serialized
            cls = type(serializer)
            if cls not in scalars:
                scalars[cls] = self._passes_scalars(cls)
            for member_key, member_shape in shape.members.items():
                member_shape.parent = shape
                keys = self.keys(serializer, value, member_key, member_shape)
                if keys is None:
                    serializer._serialize_structure_member(wrapper, value, member_shape, member_key)
                    continue
                member = next((value[k] for k in keys if k in value), None)
                if member is None:
                    continue
                if scalars[cls] and self._as_is(member_shape, member):
                    name = member_shape.serialization.get("name", member_key)
                    wrapper[name] = list(member) if type(member) is list else member
                else:
                    serializer._serialize(wrapper, member, member_shape, member_key)
            if key:
                serializer._default_serialize(serialized, wrapper, shape, key)
            return None

        return serialize


def _retained(self: Any, queue_name: str, message: Any) -> bool:
    """moto's `is_message_valid_based_on_retention_period`, reading the one attribute it needs."""
    from moto.core.utils import unix_time  # noqa: PLC0415 (as moto's own check reads the time)

    retention_period = self.get_queue(queue_name).message_retention_period
    return bool(retention_period + message.sent_timestamp / 1000 > unix_time())


def _remembered(original: Callable[[Any, str | None], Any]) -> Callable[[Any, str | None], Any]:
    found: dict[str | None, Any] = {}

    @functools.wraps(original)
    def get_backend_for_host(self: Any, host: str | None) -> Any:
        if host not in found:
            found[host] = original(self, host)
        return found[host]

    return get_backend_for_host


def _written_items(operation: str, params: Any) -> list[tuple[str, dict[str, Any]]] | None:
    """(table name, item or key) of every item a write request may have changed, or None when
    that cannot be told from the request (a table made or dropped, PartiQL, anything else)."""
    if not isinstance(params, dict):
        return None
    if operation == "PutItem":
        return [(params["TableName"], params["Item"])]
    if operation in ("UpdateItem", "DeleteItem"):
        return [(params["TableName"], params["Key"])]
    if operation == "BatchWriteItem":
        return [
            (table, request.get("PutRequest", {}).get("Item") or request["DeleteRequest"]["Key"])
            for table, requests in params["RequestItems"].items()
            for request in requests
        ]
    if operation == "TransactWriteItems":
        written = []
        for entry in params["TransactItems"]:
            for kind, details in entry.items():
                if kind in ("Put", "Update", "Delete"):
                    written.append((details["TableName"], details.get("Item") or details["Key"]))
        return written
    return None


class _Groups:
    """One table's items grouped by their string values of some attributes (an index's key),
    kept current from the items each write request names: a write costs its own items, not a
    pass over the table."""

    def __init__(self, table: Any, names: tuple[str, ...]) -> None:
        self.table, self.names = table, names
        self.by_value: dict[tuple[str, ...], dict[Any, Any]] = {}
        self._member: dict[Any, tuple[str, ...]] = {}  # item key -> its group
        self._stale: set[Any] | None = None  # keys to look at again; None: every item

    def members(self, values: tuple[str, ...]) -> list[Any]:
        """The items whose attributes hold `values` (in no order: moto sorts its answers)."""
        self._refresh()
        return list(self.by_value.get(values, {}).values())

    def touched(self, key: dict[str, Any]) -> None:
        if self._stale is None:
            return
        try:
            self._stale.add(self._key_of(key))
        except (KeyError, TypeError):  # a key moto refused: it wrote nothing
            return

    def invalidate(self) -> None:
        self._stale = None

    def _key_of(self, attributes: dict[str, Any]) -> Any:
        from moto.dynamodb.models.dynamo_type import DynamoType  # noqa: PLC0415

        hash_value = DynamoType(attributes[self.table.hash_key_attr])
        if self.table.range_key_attr is None:
            return (hash_value, None)
        return (hash_value, DynamoType(attributes[self.table.range_key_attr]))

    def _refresh(self) -> None:
        if self._stale is None:
            self.by_value.clear()
            self._member.clear()
            self._place_all()
            return
        for key in self._stale:
            self._remove(key)
            hash_value, range_value = key
            found = self.table.items.get(hash_value)
            if found is not None and range_value is not None:
                found = found.get(range_value)
            if found is not None:
                self._place(key, found)
        self._stale.clear()

    def _place_all(self) -> None:
        for hash_value, partition in self.table.items.items():
            if self.table.range_key_attr is None:
                self._place((hash_value, None), partition)
            else:
                for range_value, item in partition.items():
                    self._place((hash_value, range_value), item)
        self._stale = set()

    def _place(self, key: Any, item: Any) -> None:
        held = [item.attrs.get(name) for name in self.names]
        if all(value is not None and value.type == "S" for value in held):
            values = tuple(value.value for value in held)
            self.by_value.setdefault(values, {})[key] = item
            self._member[key] = values

    def _remove(self, key: Any) -> None:
        values = self._member.pop(key, None)
        if values is not None:
            group = self.by_value[values]
            del group[key]
            if not group:
                del self.by_value[values]


class _IndexGroups:
    """Every `_Groups` made so far, by table and attributes, told of each write request."""

    def __init__(self) -> None:
        self._groups: dict[tuple[str, tuple[str, ...]], _Groups] = {}

    def of(self, table: Any, names: tuple[str, ...]) -> _Groups:
        groups = self._groups.get((table.name, names))
        if groups is None or groups.table is not table:  # new, or a table made again
            groups = self._groups[(table.name, names)] = _Groups(table, names)
        return groups

    def written(self, operation: str, params: Any) -> None:
        try:
            written = _written_items(operation, params)
        except (KeyError, TypeError, AttributeError):
            written = None  # a malformed request: moto refused it, but look again at all
        if written is None:
            for groups in self._groups.values():
                groups.invalidate()
            return
        for table_name, key in written:
            name = table_name.rpartition("/")[2]  # a table may be named by its ARN
            for (grouped_name, _), groups in self._groups.items():
                if grouped_name == name:
                    groups.touched(key)


_index_groups = _IndexGroups()


def _query_candidates(table: Any, arguments: dict[str, Any]) -> list[Any] | None:
    """The items a query can match (a superset of its answer), or None for moto's own list."""
    if arguments.get("index_name") is None:
        hash_key = arguments.get("hash_key")
        if hash_key is None:
            return None
        partition = table.items.get(hash_key)
        if partition is None:
            return []
        return list(partition.values()) if table.range_key_attr else [partition]
    conditions = arguments.get("hash_key_conditions") or []
    if not conditions or any(value.type != "S" for _, value in conditions):
        return None
    names = tuple(name for name, _ in conditions)
    return _index_groups.of(table, names).members(tuple(value.value for _, value in conditions))


def _from_candidates(original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def query(self: Any, *args: Any, **kwargs: Any) -> Any:
        arguments = signature.bind(self, *args, **kwargs).arguments
        candidates = _query_candidates(self, arguments)
        if candidates is None:
            return original(self, *args, **kwargs)
        # moto's query takes its items from `all_items()`: this one call gets the candidates.
        self.all_items = lambda: candidates
        try:
            return original(self, *args, **kwargs)
        finally:
            del self.all_items

    return query


def _scanned_item(value: Any) -> bool:
    """A table scan's items are read in place (`_answers_copied` copies what it answers)."""
    return getattr(_state, "scanning", False) and type(value).__name__ == "Item"


def _answers_copied(original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def scan(self: Any, *args: Any, **kwargs: Any) -> Any:
        arguments = signature.bind(self, *args, **kwargs).arguments
        if arguments.get("index_name") is not None:
            return original(self, *args, **kwargs)  # moto projects the index on its copy
        _state.scanning = True
        try:
            results, scanned, last_key = original(self, *args, **kwargs)
        finally:
            _state.scanning = False
        counted_only = getattr(_state, "counting", False)  # nothing of the items is answered
        if not arguments.get("projection_expression") and not counted_only:
            results = [copy.deepcopy(item) for item in results]  # projected ones are new
        return results, scanned, last_key

    return scan


def _counting(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """DynamoDB's Scan handler, telling the table's scan when only a count is answered."""

    @functools.wraps(original)
    def scan(self: Any) -> Any:
        _state.counting = self.body.get("Select") == "COUNT"
        try:
            return original(self)
        finally:
            _state.counting = False

    return scan


class _UpdateTrees:
    """Update expressions parsed once, and their trees copied cheaply.

    moto parses every UpdateItem's expression twice (the handler lists the names and values it
    uses, the backend applies it), and its validator deep-copies the tree before it fills it
    in: a job's transitions send the same few expressions again and again. A tree depends on
    its expression's text alone, so each is parsed once and kept, never changed: moto only
    reads it (`find_clauses`, whose answers are kept too) and validates a copy. The copy is
    made from the tree's pickled form, the same objects as `copy.deepcopy` makes (plain
    nodes, no values yet) at a fifth of its time.
    """

    KEPT = 1024

    def __init__(self) -> None:
        self._trees: dict[str, Any] = {}  # expression -> its tree
        # id(tree) -> (tree, its pickled form); holding the tree keeps its id its own
        self._pickled: dict[int, tuple[Any, bytes]] = {}
        # (id(tree), clause types) -> what find_clauses answered on that tree
        self._clauses: dict[tuple[int, tuple[type[Any], ...]], list[Any]] = {}

    def make(self, original: Callable[[str], Any]) -> Callable[[type[Any], str], Any]:
        def make(cls: type[Any], expression: str) -> Any:
            tree = self._trees.get(expression)
            if tree is None:
                tree = original(expression)  # raises on a bad expression: nothing kept
                if len(self._trees) >= self.KEPT:
                    self._forget_all()
                self._trees[expression] = tree
                self._pickled[id(tree)] = (tree, pickle.dumps(tree, pickle.HIGHEST_PROTOCOL))
            return tree

        return make

    def _forget_all(self) -> None:
        self._trees.clear()
        self._pickled.clear()
        self._clauses.clear()

    def deepcopy(self, value: Any, memo: dict[int, Any] | None = None) -> Any:
        """copy.deepcopy for moto's validators, from the pickled form of a kept tree."""
        kept = self._pickled.get(id(value))
        if kept is not None and kept[0] is value:
            return pickle.loads(kept[1])  # noqa: S301 (bytes this process pickled itself)
        return copy.deepcopy(value, memo)

    def find_clauses(self, root: type[Any]) -> Callable[[Any, Any], Any]:
        """`root.find_clauses`, its answers kept for the kept trees (whose roots are `root`s;
        its subclasses, the clauses within, go straight to moto's)."""
        original: Callable[[Any, Any], Any] = root.find_clauses

        @functools.wraps(original)
        def find_clauses(node: Any, clause_types: Any) -> Any:
            kept = self._pickled.get(id(node)) if type(node) is root else None
            if kept is None or kept[0] is not node:
                return original(node, clause_types)  # a copy being validated: it changes
            key = (id(node), tuple(clause_types))
            if key not in self._clauses:
                self._clauses[key] = original(node, clause_types)
            return list(self._clauses[key])

        return find_clauses


# A condition's parse, by its expression, names and values: (the operation tree, the names and
# values it used). A request's handler parses it to check the names and values used, then its
# backend parses it again to evaluate it; the second is answered from here.
_PARSED_CONDITIONS_KEPT = 64
_parsed_conditions: dict[tuple[str, str, str], tuple[Any, list[str], list[str]]] = {}


def _parsed_once(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    @functools.wraps(original)
    def parse(self: Any) -> Any:
        try:
            key = (
                str(self.condition_expression),
                json.dumps(self.expression_attribute_names, sort_keys=True),
                json.dumps(self.expression_attribute_values, sort_keys=True),
            )
        except (TypeError, ValueError):  # a value JSON cannot hold (bytes): parsed as moto does
            return original(self)
        parsed = _parsed_conditions.get(key)
        if parsed is None:
            tree = original(self)  # raises on a bad expression: nothing kept
            parsed = (tree, list(self.expr_attr_names_found), list(self.expr_attr_values_found))
            if len(_parsed_conditions) >= _PARSED_CONDITIONS_KEPT:
                del _parsed_conditions[next(iter(_parsed_conditions))]  # the oldest
            _parsed_conditions[key] = parsed
        else:
            self.expr_attr_names_found = list(parsed[1])
            self.expr_attr_values_found = list(parsed[2])
        return parsed[0]

    return parse


def _kinds_per_class(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """DepthFirstTraverser.nodes_to_be_processed, once per traverser class: moto builds its
    processing map (a dict of bound methods) to list its keys for every node of every tree,
    and those keys are classes fixed in each traverser's code."""
    kinds: dict[type[Any], Any] = {}

    @functools.wraps(original)
    def nodes_to_be_processed(self: Any) -> Any:
        cls = type(self)
        if cls not in kinds:
            kinds[cls] = original(self)
        return kinds[cls]

    return nodes_to_be_processed


class _KeyPairWhenUsed:
    """Stands for the key pair moto's KMS makes per key, and makes it on its first use."""

    def __init__(self, key_spec: str, generate: Callable[[str], Any]) -> None:
        self._key_spec = key_spec
        self._generate = generate
        self._made: Any = None

    def __getattr__(self, name: str) -> Any:
        # Only what the pair itself answers: a copy or a pickle probing private names finds
        # them missing instead of making a pair.
        if name.startswith("_"):
            raise AttributeError(name)
        if self._made is None:
            self._made = self._generate(self._key_spec)
        return getattr(self._made, name)


_key_pairs_when_used = False


def key_pairs_when_used() -> None:
    """moto's KMS makes a key's pair when the key first signs or verifies (once per process)."""
    from moto.kms import models as kms_models  # noqa: PLC0415

    global _key_pairs_when_used  # noqa: PLW0603 (once per process)
    if _key_pairs_when_used:
        return
    _key_pairs_when_used = True
    # The name as moto's Key.__init__ looks it up: in its own module's globals.
    generate = kms_models.generate_private_key  # type: ignore[attr-defined]
    kms_models.generate_private_key = functools.partial(  # type: ignore[attr-defined,assignment]
        _KeyPairWhenUsed, generate=generate
    )


def _routing_remembered() -> None:
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication  # noqa: PLC0415

    dispatcher = DomainDispatcherApplication
    dispatcher.get_backend_for_host = _remembered(dispatcher.get_backend_for_host)  # type: ignore[method-assign,assignment]


def _queries_from_groups() -> None:
    from moto.dynamodb.models.table import Table  # noqa: PLC0415

    moto_fixes.after_writes(_index_groups.written)
    Table.query = _from_candidates(Table.query)  # type: ignore[method-assign]


def _scans_copy_answers() -> None:
    from moto.dynamodb.models import table as table_module  # noqa: PLC0415
    from moto.dynamodb.models.table import Table  # noqa: PLC0415
    from moto.dynamodb.responses import DynamoHandler  # noqa: PLC0415

    Table.scan = _answers_copied(Table.scan)  # type: ignore[method-assign]
    table_module.copy = moto_fixes.copy_module(_scanned_item)  # type: ignore[attr-defined]
    DynamoHandler.scan = _counting(DynamoHandler.scan)  # type: ignore[method-assign]


def _expressions_parsed_once() -> None:
    from moto.dynamodb.comparisons import ConditionExpressionParser  # noqa: PLC0415
    from moto.dynamodb.parsing import validators  # noqa: PLC0415
    from moto.dynamodb.parsing.ast_nodes import (  # type: ignore[attr-defined]  # noqa: PLC0415
        DepthFirstTraverser,
        UpdateExpression,
    )
    from moto.dynamodb.parsing.expressions import (  # type: ignore[attr-defined]  # noqa: PLC0415
        UpdateExpressionParser,
    )

    trees = _UpdateTrees()
    UpdateExpressionParser.make = classmethod(trees.make(UpdateExpressionParser.make))
    validators.deepcopy = trees.deepcopy  # type: ignore[attr-defined,assignment]
    UpdateExpression.find_clauses = trees.find_clauses(UpdateExpression)
    DepthFirstTraverser.nodes_to_be_processed = _kinds_per_class(
        DepthFirstTraverser.nodes_to_be_processed
    )
    ConditionExpressionParser.parse = _parsed_once(ConditionExpressionParser.parse)  # type: ignore[method-assign,assignment]


def _members_read_from_dicts() -> None:
    from moto.core.serialize import ResponseSerializer  # noqa: PLC0415

    members = _DictMembers()
    ResponseSerializer.get_value = members.get_value(ResponseSerializer.get_value)  # type: ignore[method-assign]
    ResponseSerializer._serialize_type_structure = members.serialize_structure(  # type: ignore[method-assign]
        ResponseSerializer._serialize_type_structure
    )


def _retention_from_queue() -> None:
    from moto.sqs.models import SQSBackend  # noqa: PLC0415

    SQSBackend.is_message_valid_based_on_retention_period = _retained  # type: ignore[method-assign]


# Each speed-up by name, in the order of the module's description: bench/moto_speedups.py
# measures each alone against moto without any.
SPEEDUPS: dict[str, Callable[[], None]] = {
    "routing": _routing_remembered,
    "queries": _queries_from_groups,
    "serializer": _members_read_from_dicts,
    "expressions": _expressions_parsed_once,
    "retention": _retention_from_queue,
    "scans": _scans_copy_answers,
    "kms key pairs": key_pairs_when_used,
}
_applied: set[str] = set()


def apply(only: Iterable[str] | None = None) -> None:
    """The speed-ups named in `only` (every one by default), each once per process, before moto
    server makes any object (moto_fixes' `apply` calls this unless asked for the baseline)."""
    for name in SPEEDUPS if only is None else only:
        if name not in _applied:
            _applied.add(name)
            SPEEDUPS[name]()

"""The loopback Weaviate's data model and search engine: collections and objects, BM25,
vector and hybrid scoring, and filter evaluation, the way Weaviate does them."""

from __future__ import annotations

import fnmatch
import math
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from weaviate.proto.v1 import (
    base_pb2,
    base_search_pb2,
)

#: Weaviate's default page size when a search has no ``limit``.
DEFAULT_LIMIT = 10

# Weaviate's ``en`` stop-word preset (entities/stopwords/presets.go).
EN_STOPWORDS = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into",
        "is", "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then",
        "there", "these", "they", "this", "to", "was", "will", "with",
    }
)  # fmt: skip
_WORD = re.compile(r"[^\W_]+")
_BM25_K1 = 1.2
_BM25_B = 0.75


_VALUE_NAMES = {
    "value_text": "valueText",
    "value_int": "valueInt",
    "value_boolean": "valueBoolean",
    "value_number": "valueNumber",
    "value_text_array": "valueTextArray",
    "value_int_array": "valueIntArray",
    "value_boolean_array": "valueBooleanArray",
    "value_number_array": "valueNumberArray",
    "value_geo": "valueGeoRange",
}
_VALUE_FOR_TYPE = {
    "text": "valueText",
    "uuid": "valueText",
    "date": "valueDate",
    "int": "valueInt",
    "number": "valueNumber",
    "boolean": "valueBoolean",
}
_Op = base_pb2.Filters.Operator


def tokenize(text: str) -> list[str]:
    """Weaviate's ``word`` tokenization: lower-cased runs of letters and digits."""
    return _WORD.findall(text.lower())


@dataclass(frozen=True)
class TestCollection:
    """A collection the server starts with.

    :param name: the collection (class) name, as Weaviate spells it (capitalised).
    :param multi_tenancy: whether objects live in tenants (then every request names one).
    :param tenants: the tenants that exist from the start.
    :param properties: property name -> Weaviate data type (``text``, ``text[]``, ``int``,
        ``number``, ``boolean``, ``uuid``, ``date``, ``object``...). Properties not listed
        are added on first write, like Weaviate's auto-schema.
    """

    __test__ = False  # not a pytest test class, despite the name

    name: str
    multi_tenancy: bool = False
    tenants: tuple[str, ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict)


@dataclass
class StoredObject:
    """One object as the server holds it; ``vectors`` maps a vector name (``"default"``
    for the unnamed vector) to its values."""

    uuid: str
    properties: dict[str, Any]
    vectors: dict[str, list[float]] = field(default_factory=dict)


@dataclass
class _Collection:
    name: str
    multi_tenancy: bool
    properties: dict[str, str]
    # tenant (None when multi-tenancy is off) -> uuid -> object
    shards: dict[str | None, dict[str, StoredObject]]


class _Abort(Exception):
    """A request that fails the way Weaviate would fail it."""

    def __init__(self, message: str, code: grpc.StatusCode = grpc.StatusCode.UNKNOWN) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def _text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple):
        return " ".join(v for v in value if isinstance(v, str))
    return ""


def _bm25(
    query: str,
    properties: list[str],
    corpus: list[StoredObject],
    allowed: list[StoredObject],
    schema: Mapping[str, str],
) -> list[tuple[StoredObject, float]]:
    """BM25 summed over the searched properties; statistics over the whole shard."""
    terms = [t for t in tokenize(query) if t not in EN_STOPWORDS]
    if not terms:
        return []
    searched = (
        [p for p in properties if p in schema]
        if properties
        else [name for name, dtype in schema.items() if dtype in {"text", "text[]"}]
    )
    n_docs = len(corpus) or 1
    scores: dict[str, float] = {}
    allowed_ids = {o.uuid for o in allowed}
    for prop in searched:
        docs = {o.uuid: tokenize(_text_of(o.properties.get(prop))) for o in corpus}
        lengths = [len(t) for t in docs.values()]
        avg = (sum(lengths) / len(lengths)) if lengths and sum(lengths) else 1.0
        for term in set(terms):
            df = sum(1 for tokens in docs.values() if term in tokens)
            if not df:
                continue
            idf = math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
            weight = terms.count(term)
            for uid, tokens in docs.items():
                if uid not in allowed_ids:
                    continue
                tf = tokens.count(term)
                if not tf:
                    continue
                norm = tf + _BM25_K1 * (1 - _BM25_B + _BM25_B * len(tokens) / avg)
                scores[uid] = scores.get(uid, 0.0) + weight * idf * tf * (_BM25_K1 + 1) / norm
    by_id = {o.uuid: o for o in allowed}
    ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    return [(by_id[uid], score) for uid, score in ranked if score > 0]


def _floats(raw: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


def _unpack_vectors(vectors: Sequence[base_pb2.Vectors]) -> list[float] | None:
    for vec in vectors:
        if vec.type == base_pb2.Vectors.VECTOR_TYPE_MULTI_FP32:
            raise _Abort("multi-vector queries are not supported by the test server")
        return _floats(vec.vector_bytes)
    return None


def _query_vector(
    message: Any, targets: base_search_pb2.Targets | None, legacy_targets: list[str]
) -> tuple[str | None, list[float] | None]:
    """(target vector name or None, query vector) from a NearVector-like message."""
    names = list(targets.target_vectors) if targets is not None else []
    names = names or legacy_targets
    if len(set(names)) > 1:
        raise _Abort("the test server supports one target vector per query")
    target = names[0] if names else None
    vector: list[float] | None = None
    if getattr(message, "vector_bytes", b""):
        vector = _floats(message.vector_bytes)
    elif len(getattr(message, "vectors", ())):
        vector = _unpack_vectors(message.vectors)
    elif len(getattr(message, "vector_for_targets", ())):
        first = message.vector_for_targets[0]
        target = target or first.name
        vector = (
            _floats(first.vector_bytes) if first.vector_bytes else _unpack_vectors(first.vectors)
        )
    elif len(getattr(message, "vector", ())):
        vector = [float(x) for x in message.vector]
    return target, vector


def _cosine_distance(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return 1.0 - (dot / norm if norm else 0.0)


def _vector_search(
    vector: list[float], target: str | None, objects: list[StoredObject], collection: str
) -> list[tuple[StoredObject, float]]:
    names = {name for o in objects for name in o.vectors}
    if target is None:
        if "default" in names or not names:
            target = "default"
        elif len(names) == 1:
            target = next(iter(names))
        else:
            raise _Abort(
                f"class {collection} has multiple vectors, but no target vectors were provided"
            )
    elif names and target not in names:
        raise _Abort(f'target vector "{target}" does not exist for class {collection}')
    out = []
    for obj in objects:
        vec = obj.vectors.get(target)
        if vec is None:
            continue
        if len(vec) != len(vector):
            raise _Abort(
                f"vector search: knn search: vector lengths don't match: {len(vec)} vs "
                f"{len(vector)}"
            )
        out.append((obj, _cosine_distance(vector, vec)))
    out.sort(key=lambda item: (item[1], item[0].uuid))
    return out


def _hybrid(
    hybrid: base_search_pb2.Hybrid,
    corpus: list[StoredObject],
    allowed: list[StoredObject],
    schema: Mapping[str, str],
    collection: str,
) -> list[tuple[StoredObject, dict[str, Any]]]:
    if hybrid.use_alpha_param:
        alpha = hybrid.alpha_param if hybrid.HasField("alpha_param") else 0.75
    else:
        alpha = hybrid.alpha
    targets = hybrid.targets if hybrid.HasField("targets") else None
    target, vector = _query_vector(hybrid, targets, list(hybrid.target_vectors))
    if vector is None and hybrid.HasField("near_vector"):
        nv = hybrid.near_vector
        nv_targets = nv.targets if nv.HasField("targets") else targets
        target, vector = _query_vector(nv, nv_targets, list(nv.target_vectors) or [target or ""])
        target = target or None
    if vector is None and alpha > 0:
        raise _Abort(
            f"hybrid search: class {collection} has no vectorizer; provide a vector or use alpha=0"
        )
    lexical = _bm25(hybrid.query, list(hybrid.properties), corpus, allowed, schema)
    dense = _vector_search(vector, target, allowed, collection) if vector is not None else []
    if hybrid.HasField("vector_distance"):
        dense = [(o, d) for o, d in dense if d <= hybrid.vector_distance]
    fused: dict[str, float] = {}
    objects: dict[str, StoredObject] = {}
    ranked_fusion = hybrid.fusion_type == base_search_pb2.Hybrid.FUSION_TYPE_RANKED
    for weight, results, higher_better in (
        (1 - alpha, lexical, True),
        (alpha, dense, False),
    ):
        if weight <= 0 or not results:
            continue
        values = [v for _, v in results]
        low, high = min(values), max(values)
        for rank, (obj, value) in enumerate(results):
            if ranked_fusion:
                part = 1.0 / (60 + rank)
            elif high == low:
                part = 1.0
            else:
                part = (
                    (value - low) / (high - low) if higher_better else (high - value) / (high - low)
                )
            objects[obj.uuid] = obj
            fused[obj.uuid] = fused.get(obj.uuid, 0.0) + weight * part
    ranked = sorted(fused.items(), key=lambda item: (-item[1], item[0]))
    method = "rankedFusion" if ranked_fusion else "relativeScoreFusion"
    return [
        (objects[uid], {"score": score, "explain": f"(Hybrid) {method}, alpha {alpha}"})
        for uid, score in ranked
    ]


# -- filters ------------------------------------------------------------------------------------


def _filter_value(where: base_pb2.Filters) -> tuple[str, Any]:
    kind = where.WhichOneof("test_value")
    if kind is None:
        raise _Abort("filter without a value")
    raw = getattr(where, kind)
    if kind.endswith("_array"):
        return kind, list(raw.values)
    if kind == "value_geo":
        raise _Abort("geo filters are not supported by the test server")
    return kind, raw


def _check_value_type(kind: str, dtype: str, prop: str) -> str:
    base = dtype.removesuffix("[]")
    family = {
        "value_text": "text",
        "value_text_array": "text",
        "value_int": "num",
        "value_int_array": "num",
        "value_number": "num",
        "value_number_array": "num",
        "value_boolean": "boolean",
        "value_boolean_array": "boolean",
    }[kind]
    wanted = {"text": "text", "uuid": "text", "date": "text", "int": "num", "number": "num"}
    expected = wanted.get(base, base)
    if family != expected:
        raise _Abort(
            f'data type filter cannot use "{_VALUE_NAMES[kind]}" on type "{base}", use '
            f'"{_VALUE_FOR_TYPE.get(base, "valueText")}" instead'
        )
    return base


def _equal(candidate: Any, value: Any, base: str) -> bool:
    if candidate is None:
        return False
    if base == "text":
        if not isinstance(candidate, str):
            return False
        wanted = tokenize(str(value))
        have = set(tokenize(candidate))
        return bool(wanted) and all(t in have for t in wanted)
    if base == "uuid":
        return str(candidate).lower() == str(value).lower()
    if base == "boolean":
        return isinstance(candidate, bool) and candidate is bool(value)
    if base in {"int", "number"}:
        if isinstance(candidate, bool) or not isinstance(candidate, int | float):
            return False
        return float(candidate) == float(value)
    return candidate == value


def _compare(candidate: Any, value: Any, op: int) -> bool:
    if candidate is None or isinstance(candidate, bool | Mapping):
        return False
    try:
        if op == _Op.OPERATOR_GREATER_THAN:
            return candidate > value
        if op == _Op.OPERATOR_GREATER_THAN_EQUAL:
            return candidate >= value
        if op == _Op.OPERATOR_LESS_THAN:
            return candidate < value
        return candidate <= value
    except TypeError:
        return False


def _matches(where: base_pb2.Filters, obj: StoredObject, schema: Mapping[str, str], cls: str):
    op = where.operator
    if op == _Op.OPERATOR_AND:
        return all(_matches(f, obj, schema, cls) for f in where.filters)
    if op == _Op.OPERATOR_OR:
        return any(_matches(f, obj, schema, cls) for f in where.filters)
    if op == _Op.OPERATOR_NOT:
        return not any(_matches(f, obj, schema, cls) for f in where.filters)
    if where.HasField("target"):
        if where.target.WhichOneof("target") != "property":
            raise _Abort("reference filters are not supported by the test server")
        prop = where.target.property
    elif len(where.on) == 1:
        prop = where.on[0]
    else:
        raise _Abort(f"paths needs to have a uneven number of components, got {list(where.on)}")
    if prop == "_id":
        dtype, current = "uuid", obj.uuid
    else:
        if prop not in schema:
            raise _Abort(
                f"no such prop with name '{prop}' found in class '{cls}' in the schema. Check "
                "your schema files for which properties in this class are available"
            )
        dtype, current = schema[prop], obj.properties.get(prop)
    if op == _Op.OPERATOR_IS_NULL:
        return (current is None or current == []) == bool(where.value_boolean)
    kind, value = _filter_value(where)
    base = _check_value_type(kind, dtype, prop)
    if kind in {"value_int", "value_number"} and base == "int" and float(value) != int(value):
        raise _Abort(f"filtering for integer, but received a floating point number {value}")
    candidates = current if isinstance(current, list) else [current]
    if op in {_Op.OPERATOR_EQUAL, _Op.OPERATOR_NOT_EQUAL}:
        values = value if isinstance(value, list) else [value]
        hit = any(_equal(c, v, base) for c in candidates for v in values)
        return hit if op == _Op.OPERATOR_EQUAL else not hit
    if op in {_Op.OPERATOR_CONTAINS_ANY, _Op.OPERATOR_CONTAINS_ALL, _Op.OPERATOR_CONTAINS_NONE}:
        values = value if isinstance(value, list) else [value]
        found = [any(_equal(c, v, base) for c in candidates) for v in values]
        if op == _Op.OPERATOR_CONTAINS_ANY:
            return any(found)
        if op == _Op.OPERATOR_CONTAINS_ALL:
            return all(found)
        return not any(found)
    if op in {
        _Op.OPERATOR_GREATER_THAN,
        _Op.OPERATOR_GREATER_THAN_EQUAL,
        _Op.OPERATOR_LESS_THAN,
        _Op.OPERATOR_LESS_THAN_EQUAL,
    }:
        return any(_compare(c, value, op) for c in candidates)
    if op == _Op.OPERATOR_LIKE:
        pattern = str(value).lower()
        return any(
            isinstance(c, str) and fnmatch.fnmatchcase(c.lower(), pattern) for c in candidates
        )
    raise _Abort(f"unknown filter operator {op}")

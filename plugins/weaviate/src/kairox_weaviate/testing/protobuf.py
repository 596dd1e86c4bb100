"""Between Python values and Weaviate's protobuf messages: property values, batch objects,
vectors and search results."""

from __future__ import annotations

import struct
import uuid as uuid_lib
from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format, struct_pb2
from weaviate.proto.v1 import (
    base_pb2,
    batch_pb2,
    properties_pb2,
    search_get_pb2,
)

from kairox_weaviate.testing.engine import StoredObject, _Abort, _floats

# -- values -------------------------------------------------------------------------------------


def _infer_type(value: Any, *, grpc_struct: bool = False) -> str:
    """The data type Weaviate's auto-schema gives a first value (numbers arriving in a gRPC
    ``Struct`` are all doubles, so they become ``number``)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "number" if grpc_struct else "int"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        if not value:
            return "text[]"
        return _infer_type(value[0], grpc_struct=grpc_struct) + "[]"
    return "text"


def _to_value(value: Any) -> properties_pb2.Value:
    if value is None:
        return properties_pb2.Value(null_value=struct_pb2.NULL_VALUE)
    if isinstance(value, bool):
        return properties_pb2.Value(bool_value=value)
    if isinstance(value, int):
        return properties_pb2.Value(int_value=value)
    if isinstance(value, float):
        return properties_pb2.Value(number_value=value)
    if isinstance(value, str):
        return properties_pb2.Value(text_value=value)
    if isinstance(value, uuid_lib.UUID):
        return properties_pb2.Value(uuid_value=str(value))
    if isinstance(value, Mapping):
        return properties_pb2.Value(object_value=_to_properties(value))
    if isinstance(value, list | tuple):
        return properties_pb2.Value(list_value=_to_list_value(list(value)))
    return properties_pb2.Value(text_value=str(value))


def _to_list_value(values: list[Any]) -> properties_pb2.ListValue:
    if values and all(isinstance(v, bool) for v in values):
        return properties_pb2.ListValue(bool_values=properties_pb2.BoolValues(values=values))
    if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        packed = struct.pack(f"<{len(values)}q", *values)
        return properties_pb2.ListValue(int_values=properties_pb2.IntValues(values=packed))
    if values and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        packed = struct.pack(f"<{len(values)}d", *values)
        return properties_pb2.ListValue(number_values=properties_pb2.NumberValues(values=packed))
    if values and all(isinstance(v, Mapping) for v in values):
        return properties_pb2.ListValue(
            object_values=properties_pb2.ObjectValues(values=[_to_properties(v) for v in values])
        )
    return properties_pb2.ListValue(
        text_values=properties_pb2.TextValues(values=[str(v) for v in values])
    )


def _to_properties(mapping: Mapping[str, Any]) -> properties_pb2.Properties:
    return properties_pb2.Properties(fields={k: _to_value(v) for k, v in mapping.items()})


def _batch_properties(props: batch_pb2.BatchObject.Properties, schema: Mapping[str, str]):
    """A ``BatchObject``'s properties as Python values."""
    out: dict[str, Any] = {}
    if props.HasField("non_ref_properties"):
        for key, value in json_format.MessageToDict(props.non_ref_properties).items():
            if isinstance(value, float) and schema.get(key) == "int" and value.is_integer():
                value = int(value)
            out[key] = value
    out.update(_nested_properties(props))
    return out


def _nested_properties(props: Any) -> dict[str, Any]:
    """The array, object, object-array and empty-list properties of a message (a batch
    object's properties or an object property's value) as Python values."""
    out = _array_properties(props)
    for obj in props.object_properties:
        out[obj.prop_name] = _object_value(obj.value)
    for arr in props.object_array_properties:
        out[arr.prop_name] = [_object_value(v) for v in arr.values]
    for name in props.empty_list_props:
        out[name] = []
    return out


def _array_properties(props: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for arr in props.text_array_properties:
        out[arr.prop_name] = list(arr.values)
    for arr in props.int_array_properties:
        out[arr.prop_name] = [int(v) for v in arr.values]
    for arr in props.boolean_array_properties:
        out[arr.prop_name] = [bool(v) for v in arr.values]
    for arr in props.number_array_properties:
        if arr.values_bytes:
            count = len(arr.values_bytes) // 8
            out[arr.prop_name] = list(struct.unpack(f"<{count}d", arr.values_bytes))
        else:
            out[arr.prop_name] = [float(v) for v in arr.values]
    return out


def _object_value(value: base_pb2.ObjectPropertiesValue) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if value.HasField("non_ref_properties"):
        out.update(json_format.MessageToDict(value.non_ref_properties))
    out.update(_nested_properties(value))
    return out


def _batch_vectors(obj: batch_pb2.BatchObject) -> dict[str, list[float]]:
    vectors: dict[str, list[float]] = {}
    if obj.vector_bytes:
        vectors["default"] = _floats(obj.vector_bytes)
    elif len(obj.vector):
        vectors["default"] = [float(x) for x in obj.vector]
    for vec in obj.vectors:
        if vec.type == base_pb2.Vectors.VECTOR_TYPE_MULTI_FP32:
            raise _Abort(f"multi-vector {vec.name!r} is not supported by the test server")
        vectors[vec.name or "default"] = _floats(vec.vector_bytes)
    return vectors


# -- search -------------------------------------------------------------------------------------


#: The scores a search may ask for: ``MetadataResult`` field, and the engine's key.
_SCORE_FIELDS = (
    ("score", "score"),
    ("explain_score", "explain"),
    ("distance", "distance"),
    ("certainty", "certainty"),
)


def _search_result(
    obj: StoredObject,
    meta: Mapping[str, Any],
    request: search_get_pb2.SearchRequest,
    collection: str,
    malformed: set[str],
) -> search_get_pb2.SearchResult:
    if "drop_properties" in malformed:
        properties: dict[str, Any] = {}
    elif request.HasField("properties") and not request.properties.return_all_nonref_properties:
        wanted = set(request.properties.non_ref_properties)
        properties = {k: v for k, v in obj.properties.items() if k in wanted}
    else:
        properties = obj.properties
    result_meta = search_get_pb2.MetadataResult(
        id=obj.uuid, id_as_bytes=uuid_lib.UUID(obj.uuid).bytes
    )
    asked = request.metadata if request.HasField("metadata") else None
    if "no_score" not in malformed and asked is not None:
        for field, key in _SCORE_FIELDS:
            if getattr(asked, field) and key in meta:
                setattr(result_meta, field, meta[key])
                setattr(result_meta, f"{field}_present", True)
    if asked is not None and (asked.vector or len(asked.vectors)):
        for name, vec in obj.vectors.items():
            if asked.vector and name == "default":
                result_meta.vector_bytes = struct.pack(f"<{len(vec)}f", *vec)
            elif name in asked.vectors:
                result_meta.vectors.append(
                    base_pb2.Vectors(
                        name=name,
                        vector_bytes=struct.pack(f"<{len(vec)}f", *vec),
                        type=base_pb2.Vectors.VECTOR_TYPE_SINGLE_FP32,
                    )
                )
    return search_get_pb2.SearchResult(
        properties=search_get_pb2.PropertiesResult(
            non_ref_props=_to_properties(properties), target_collection=collection
        ),
        metadata=result_meta,
    )

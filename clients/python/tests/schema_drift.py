"""Compares the SDK with an OpenAPI document: models against components/schemas, methods against operations.

Each check returns a list of problems (empty when the SDK follows the document), so a test can
also show that a field planted in a copy of the document is caught.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
from datetime import datetime
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union, get_args, get_origin, get_type_hints

from agent_task_service._models import model_fields, snake_case


def resolve(doc: Mapping[str, Any], schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """A schema with its `$ref` followed (#/components/schemas/Name)."""
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = doc["components"]["schemas"][name]
    return schema


def json_types(schema: Mapping[str, Any]) -> Set[str]:
    """The JSON types a schema allows; an empty set means any."""
    t = schema.get("type")
    if t is None:
        return set()
    return {t} if isinstance(t, str) else set(t)


def is_optional(tp: Any) -> bool:
    return (get_origin(tp) is Union or get_origin(tp) is types.UnionType) and type(None) in get_args(tp)


def strip_optional(tp: Any) -> Any:
    if not is_optional(tp):
        return tp
    rest = tuple(a for a in get_args(tp) if a is not type(None))
    return rest[0] if len(rest) == 1 else Union[rest]  # type: ignore[return-value]


def check_model(doc: Mapping[str, Any], schema_name: str, cls: type) -> List[str]:
    """Every problem between `cls` and the named schema: fields, names, nullability, types."""
    schemas = doc.get("components", {}).get("schemas", {})
    if schema_name not in schemas:
        return [f"{schema_name}: not in components/schemas (the SDK models it as {cls.__name__})"]
    return _compare_object(doc, resolve(doc, schemas[schema_name]), cls, schema_name)


def _compare_object(doc: Mapping[str, Any], schema: Mapping[str, Any], cls: type, where: str) -> List[str]:
    problems: List[str] = []
    props: Mapping[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    fields = model_fields(cls)
    api = {snake_case(name): name for name in props}
    for py, js in api.items():
        if py not in fields:
            problems.append(f"{where}: the API's field {js!r} has no field {py!r} in {cls.__name__}")
    for py in fields:
        if py not in api:
            problems.append(f"{where}: {cls.__name__}.{py} is not a field of the API")
    for py, js in api.items():
        if py not in fields:
            continue
        sub = resolve(doc, props[js])
        types_ = json_types(sub)
        # A reply field may be null exactly when its type says so; a field a body may leave out (not required) is Optional too.
        api_nullable = not types_ or "null" in types_ or js not in required
        sdk_nullable = is_optional(fields[py]) or fields[py] is Any
        if api_nullable != sdk_nullable:
            want = "Optional[…]" if api_nullable else "not Optional"
            problems.append(f"{where}.{js}: {cls.__name__}.{py} is {fields[py]!r}; the API says {want}")
        problems += _compare_type(doc, sub, strip_optional(fields[py]), f"{where}.{js}")
    return problems


_SCALARS: Dict[str, Tuple[type, ...]] = {"string": (str,), "integer": (int,), "number": (float, int), "boolean": (bool,)}


def _compare_type(doc: Mapping[str, Any], schema: Mapping[str, Any], tp: Any, where: str) -> List[str]:
    types_ = json_types(schema) - {"null"}
    if not types_:
        return [] if tp is Any else [f"{where}: any JSON value in the API, {tp!r} in the SDK"]
    if len(types_) > 1:
        wanted = {t for name in types_ for t in _SCALARS.get(name, ())}
        got = set(get_args(tp)) if get_origin(tp) in (Union, types.UnionType) else {tp}
        return [] if got == wanted else [f"{where}: {sorted(types_)} in the API, {tp!r} in the SDK"]
    (kind,) = types_
    if kind == "array":
        if get_origin(tp) not in (list, List):
            return [f"{where}: an array in the API, {tp!r} in the SDK"]
        return _compare_type(doc, resolve(doc, schema.get("items", {})), get_args(tp)[0], f"{where}[]")
    if kind == "object":
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            if "properties" not in schema:
                return [f"{where}: a free-form object in the API, {tp.__name__} in the SDK"]
            return _compare_object(doc, schema, tp, where)
        if "properties" in schema:
            return [f"{where}: an object with fields in the API, {tp!r} in the SDK (model it)"]
        return [] if get_origin(tp) in (dict, Dict) else [f"{where}: an object in the API, {tp!r} in the SDK"]
    if kind == "null":
        return [] if tp is Any else [f"{where}: always null in the API, {tp!r} in the SDK"]
    if kind == "string" and schema.get("format") == "date-time":
        return [] if tp is datetime else [f"{where}: a date-time in the API, {tp!r} in the SDK"]
    expected = _SCALARS.get(kind, ())
    return [] if tp in expected else [f"{where}: {kind} in the API, {tp!r} in the SDK"]


# ---------- operations ----------


@dataclasses.dataclass
class Operation:
    """How the SDK covers one operation of the document.

    `names` maps an API parameter or body field to the SDK's keyword (when they differ);
    `sdk_only` are the SDK's own keywords (e.g. `files`); `ignored` are API parameters the
    method takes care of itself (a page cursor); `defaults` are required API parameters the
    SDK fills in when not given (the agent).
    """

    resource: Optional[str]
    method: str
    names: Mapping[str, str] = dataclasses.field(default_factory=dict)
    sdk_only: Sequence[str] = ()
    ignored: Sequence[str] = ()
    defaults: Sequence[str] = ()


def _api_parameters(doc: Mapping[str, Any], op: Mapping[str, Any]) -> Dict[str, bool]:
    """Every path, query and body parameter of an operation → whether it is required.

    Header parameters (Idempotency-Key on every POST) are the transport's, not a method's keywords."""
    out: Dict[str, bool] = {}
    for p in op.get("parameters", []):
        if p.get("in") in ("path", "query"):
            out[p["name"]] = bool(p.get("required"))
    body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if body:
        body = resolve(doc, body)
        for name in body.get("properties", {}):
            out[name] = name in body.get("required", [])
    return out


def operations(doc: Mapping[str, Any]) -> Dict[str, Mapping[str, Any]]:
    return {op["operationId"]: op for ops in doc["paths"].values() for op in ops.values() if isinstance(op, dict) and "operationId" in op}


def check_operations(
    doc: Mapping[str, Any],
    covered: Mapping[str, Operation],
    not_covered: Set[str],
    clients: Sequence[type],
    models: Mapping[str, Sequence[type]],
) -> List[str]:
    """Every operation has an SDK method in each client taking each of its parameters (and no others) and returning its reply's model."""
    problems: List[str] = []
    ops = operations(doc)
    for op_id in sorted(set(ops) - set(covered) - not_covered):
        problems.append(f"{op_id}: an operation of the API ({_where(ops[op_id])}) that the SDK has no method for")
    for op_id in sorted(set(covered) - set(ops)):
        problems.append(f"{op_id}: the SDK covers an operation the API does not have")
    for op_id, how in covered.items():
        if op_id not in ops:
            continue
        wanted = {how.names.get(k, snake_case(k)): req for k, req in _api_parameters(doc, ops[op_id]).items() if k not in how.ignored}
        for client in clients:
            owner = _resource_class(client, how.resource)
            fn = getattr(owner, how.method, None)
            label = f"{client.__name__}.{how.resource + '.' if how.resource else ''}{how.method}"
            if fn is None:
                problems.append(f"{op_id}: no method {label}")
                continue
            reply = _reply_schema(ops[op_id])
            if reply is not None and not _returns(fn, reply, doc, models):
                problems.append(f"{op_id}: {label} does not return a model of the reply {reply.rsplit('/', 1)[-1]}")
            params = {n: p for n, p in inspect.signature(fn).parameters.items() if n != "self"}
            for name, req in wanted.items():
                if name not in params:
                    problems.append(f"{op_id}: {label} has no parameter {name!r} for the API's {_api_name(how, name)!r}")
                elif req and params[name].default is not inspect.Parameter.empty and name not in how.defaults:
                    problems.append(f"{op_id}: {label}({name}=…) has a default, but the API requires it")
            for name in params:
                if name not in wanted and name not in how.sdk_only:
                    problems.append(f"{op_id}: {label} takes {name!r}, which the API does not")
    return problems


def _reply_schema(op: Mapping[str, Any]) -> Optional[str]:
    for status, response in op.get("responses", {}).items():
        if status.startswith("2"):
            ref = response.get("content", {}).get("application/json", {}).get("schema", {}).get("$ref")
            if ref:
                return str(ref)
    return None


def _classes(tp: Any) -> List[type]:
    """The model classes an annotation mentions (through generics, and what an awaitable context manager gives)."""
    out: List[type] = []
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        out.append(tp)
    elif isinstance(tp, type) and hasattr(tp, "__aenter__"):
        out += _classes(get_type_hints(tp.__aenter__).get("return"))
    for arg in get_args(tp):
        out += _classes(arg)
    return out


def _returns(fn: Any, reply_ref: str, doc: Mapping[str, Any], models: Mapping[str, Sequence[type]]) -> bool:
    """Whether `fn` returns the reply's model (or its twin), or for a list envelope the model of its items."""
    got = set(_classes(get_type_hints(fn).get("return")))
    name = reply_ref.rsplit("/", 1)[-1]
    names = [name] + [
        p["items"]["$ref"].rsplit("/", 1)[-1]
        for p in resolve(doc, {"$ref": reply_ref}).get("properties", {}).values()
        if p.get("type") == "array" and "$ref" in p.get("items", {})
    ]
    return any(cls in got for n in names for cls in models.get(n, ()))


def _api_name(how: Operation, sdk_name: str) -> str:
    return next((api for api, sdk in how.names.items() if sdk == sdk_name), sdk_name)


def _where(op: Mapping[str, Any]) -> str:
    return op.get("summary", "")


def _resource_class(client: type, resource: Optional[str]) -> Any:
    if resource is None:
        return client
    hints = get_type_hints(client)
    return hints.get(resource)

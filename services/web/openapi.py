"""The OpenAPI description of the HTTP/JSON API, made from the route table and the protobuf descriptors (the
JSON mapping's field names and types), so it cannot drift from what the API really sends and takes."""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from services.web.routes import HIDDEN_FIELDS, ROUTES, Route

# Well-known types as their JSON mapping has them.
WELL_KNOWN: dict[str, dict[str, Any]] = {
    "google.protobuf.Struct": {"type": "object", "additionalProperties": True},
    "google.protobuf.Value": {},
    "google.protobuf.ListValue": {"type": "array", "items": {}},
    "google.protobuf.Timestamp": {"type": "string", "format": "date-time"},
    "google.protobuf.Duration": {"type": "string"},
}
SCALARS = {
    FieldDescriptor.TYPE_STRING: {"type": "string"}, FieldDescriptor.TYPE_BOOL: {"type": "boolean"},
    FieldDescriptor.TYPE_BYTES: {"type": "string", "format": "byte"},
    FieldDescriptor.TYPE_DOUBLE: {"type": "number"}, FieldDescriptor.TYPE_FLOAT: {"type": "number"},
    FieldDescriptor.TYPE_INT32: {"type": "integer"}, FieldDescriptor.TYPE_UINT32: {"type": "integer"},
    FieldDescriptor.TYPE_SINT32: {"type": "integer"},
    # 64-bit integers are strings in protobuf's JSON mapping.
    FieldDescriptor.TYPE_INT64: {"type": "string", "format": "int64"}, FieldDescriptor.TYPE_UINT64: {"type": "string", "format": "uint64"},
    FieldDescriptor.TYPE_SINT64: {"type": "string", "format": "int64"},
}
ERROR = {"type": "object", "required": ["code", "message"], "properties": {
    "code": {"type": "string", "description": "The gRPC status name, e.g. INVALID_ARGUMENT"},
    "message": {"type": "string"},
    "fieldViolations": {"type": "array", "items": {"type": "object", "properties": {"field": {"type": "string"}, "description": {"type": "string"}}}},
    "reason": {"type": "string", "description": "google.rpc.ErrorInfo.reason: a stable code, e.g. SESSION_BUSY (docs/retries.md)"},
    "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
    "retryAfterMs": {"type": "integer", "description": "google.rpc.RetryInfo: send the same request again after this long"}}}


class SchemaBook:
    """components.schemas: one entry per message type reached."""

    def __init__(self) -> None:
        self.schemas: dict[str, Any] = {"Error": ERROR}

    def ref(self, descriptor: Descriptor) -> dict[str, Any]:
        if descriptor.full_name in WELL_KNOWN:
            return WELL_KNOWN[descriptor.full_name]
        if descriptor.full_name not in self.schemas:
            self.schemas[descriptor.full_name] = {}  # reserved first: messages may refer to themselves
            self.schemas[descriptor.full_name] = self._message(descriptor)
        return {"$ref": f"#/components/schemas/{descriptor.full_name}"}

    def _message(self, descriptor: Descriptor, skip: tuple[str, ...] = ()) -> dict[str, Any]:
        skip = (*skip, *HIDDEN_FIELDS.get(descriptor.full_name, ()))
        properties = {field.json_name: self.field(field) for field in descriptor.fields if field.name not in skip}
        return {"type": "object", "properties": properties}

    def field(self, field: FieldDescriptor) -> dict[str, Any]:
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            return {"type": "object", "additionalProperties": self._single(field.message_type.fields_by_name["value"])}
        single = self._single(field)
        return {"type": "array", "items": single} if field.is_repeated else single

    def _single(self, field: FieldDescriptor) -> dict[str, Any]:
        if field.message_type is not None:
            return self.ref(field.message_type)
        if field.enum_type is not None:
            return {"type": "string", "enum": [value.name for value in field.enum_type.values]}
        return dict(SCALARS.get(field.type, {}))

    def body(self, route: Route) -> dict[str, Any]:
        """The request body's schema: the request message without the fields the path carries."""
        return self._message(route.request_type.DESCRIPTOR, skip=tuple(route.path_fields))


def _operation(route: Route, book: SchemaBook) -> dict[str, Any]:
    descriptor = route.request_type.DESCRIPTOR
    parameters = [{"name": name, "in": "path", "required": True, "schema": {"type": "string"}} for name in route.path_fields]
    operation: dict[str, Any] = {"operationId": route.rpc, "summary": route.summary, "parameters": parameters}
    if route.method == "GET":
        parameters.extend({"name": field.json_name, "in": "query", "schema": book.field(field)}
                          for field in descriptor.fields if field.name not in route.path_fields and field.message_type is None)
    else:
        operation["requestBody"] = {"required": False, "content": {"application/json": {"schema": book.body(route)}}}
    reply = book.ref(route.response_type.DESCRIPTOR)
    content = ({"text/event-stream": {"schema": {"type": "string", "description":
                "Server-Sent Events: `event: <TurnEvent field>` and `data: <the TurnEvent as JSON>`, then `event: end`; "
                "an error after the stream began is `event: error` with the error object"}, "x-event-schema": reply}}
               if route.streamed else {"application/json": {"schema": reply}})
    operation["responses"] = {"200": {"description": "the RPC's reply", "content": content},
                              "default": {"description": "an error: the gRPC status, its message and field violations",
                                          "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}}
    return operation


MEDIA_PATH = "/api/sessions/{session_id}/media"


def _media_operation() -> dict[str, Any]:
    """GetMedia answers the file itself (services/web/media_route.py), not the RPC's JSON."""
    text = {"type": "string"}
    return {"operationId": "GetMedia", "summary": "A picture, a sound or a webview page the session may show, as the file itself "
            "(docs/web.md, Media and webview files).",
            "parameters": [{"name": "session_id", "in": "path", "required": True, "schema": text},
                           {"name": "path", "in": "query", "required": True, "schema": text},
                           {"name": "pluginId", "in": "query", "schema": text}],
            "responses": {"200": {"description": "the file, with its allow-listed type and a sandboxing content security policy",
                                  "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}}},
                          "default": {"description": "an error: the gRPC status, its message and field violations",
                                      "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}}}


def openapi_document(version: str = "1") -> dict[str, Any]:
    book = SchemaBook()
    paths: dict[str, Any] = {}
    for route in ROUTES:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route, book)
    paths[MEDIA_PATH] = {"get": _media_operation()}
    return {
        "openapi": "3.1.0",
        "info": {"title": "Covel HTTP/JSON API", "version": version,
                 "description": "The scheduler's client API over HTTP: protobuf's JSON mapping, a bearer token as on gRPC (docs/web.md)."},
        "components": {"schemas": book.schemas,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}, {}],
        "paths": paths,
    }

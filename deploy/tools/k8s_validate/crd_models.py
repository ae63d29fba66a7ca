"""CRD schemas rebuilt from the source of generated pydantic models.

Why: no package registry ships the KEDA and Prometheus Operator CRD files, but PyPI has wheels
of models that cloudcoil generated from them (crd_schemas.py fetches and pins those). This
module reads a wheel's Python source as text and parses it with `ast`; it is never imported or
run. Nothing is checked in.
"""

from __future__ import annotations

import ast
import re
import zipfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from .errors import SchemaSourceError
from .objects import Obj

# Bump when models_to_schemas changes what it writes: the converted schemas are cached under it.
CONVERTER_VERSION = "1"
# A wheel's generated modules: cloudcoil/models/<project>/[<subgroup>/]v1alpha1.py and the like.
MODEL_MODULE = re.compile(r"cloudcoil/models/[a-z0-9_]+(/[a-z0-9_]+)*/v[0-9]+((alpha|beta)[0-9]+)?\.py")


class ModelSource:
    """Rebuilds the openAPIV3Schema of each custom resource from the source of a generated model
    module (cloudcoil's codegen: a pydantic class per CRD object schema, a Resource class per
    kind). The mapping is the generator's, in reverse: field alias = property name; a field
    without a default = required; Literal = enum; Field(pattern, ge, le, gt, lt, min_length,
    max_length) = pattern, minimum, maximum, exclusive bounds, minLength/minItems; `A | B` =
    anyOf (int | str = int-or-string); list = array; dict[str, T] = additionalProperties;
    ConfigDict(extra='allow') = x-kubernetes-preserve-unknown-fields. Anything else is refused,
    not guessed."""

    SCALARS: Dict[str, Obj] = {
        "str": {"type": "string"}, "int": {"type": "integer"}, "float": {"type": "number"},
        "bool": {"type": "boolean"}, "Any": {},
        "AwareDatetime": {"type": "string", "format": "date-time"},
        "ObjectMeta": {"type": "object"},  # what every CRD says of metadata
    }
    IGNORED_FIELD_ARGS = {"description", "title", "examples", "default"}

    def __init__(self, source: str, label: str):
        """Parses `source` (never runs it); `label` names it in error messages."""
        self.label = label
        self.classes = {n.name: n for n in ast.parse(source).body if isinstance(n, ast.ClassDef)}

    def fail(self, msg: str) -> SchemaSourceError:
        """The error for source this converter does not understand: it must stop rather than
        guess a schema, and say what to do."""
        return SchemaSourceError(f"{self.label}: {msg} (has the generator changed? teach "
                                 "ModelSource, then raise CONVERTER_VERSION)")

    def resources(self) -> Dict[Tuple[str, str, str], Obj]:
        """The schema of each Resource class, by (group, version, kind): what the validator
        looks custom resources up by."""
        out = {}
        for name, node in self.classes.items():
            if [ast.unparse(b) for b in node.bases] != ["Resource"]:
                continue
            fields = {f.target.id: f for f in node.body
                      if isinstance(f, ast.AnnAssign) and isinstance(f.target, ast.Name)}
            try:
                api = self.literals(fields["api_version"].annotation)
                kind = self.literals(fields["kind"].annotation)
            except KeyError:
                raise self.fail(f"resource {name} has no api_version or kind")
            if len(api) != 1 or len(kind) != 1:
                raise self.fail(f"resource {name}: apiVersion or kind is not one literal")
            group, _, version = str(api[0]).rpartition("/")
            out[(group, version, str(kind[0]))] = self.model(name, ())
        return out

    def literals(self, ann: ast.AST) -> List[Any]:
        """The values of a Literal[...] annotation (through Annotated): apiVersion, kind and
        enums are written that way."""
        while isinstance(ann, ast.Subscript) and ast.unparse(ann.value) == "Annotated":
            ann = ann.slice.elts[0]  # type: ignore[attr-defined]
        if not (isinstance(ann, ast.Subscript) and ast.unparse(ann.value) == "Literal"):
            raise self.fail(f"expected a Literal, got {ast.unparse(ann)}")
        elts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        return [ast.literal_eval(e) for e in elts]

    def model(self, name: str, stack: Tuple[str, ...]) -> Obj:
        """The object schema of class `name` (its fields, required ones, extra='allow'); a
        RootModel is its root's schema. `stack` catches a class that contains itself."""
        if name in stack:
            raise self.fail(f"{name} contains itself")
        node = self.classes[name]
        stack = stack + (name,)
        bases = [ast.unparse(b) for b in node.bases]
        fields = [s for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
        if len(bases) == 1 and bases[0].startswith("RootModel["):
            root = [f for f in fields if f.target.id == "root"]  # type: ignore[attr-defined]
            if len(root) != 1:
                raise self.fail(f"{name}: a RootModel without one root field")
            return self.annotation(root[0].annotation, stack)[0]
        if bases not in (["BaseModel"], ["Resource"]):
            raise self.fail(f"{name}: unknown base classes {bases}")
        props: Obj = {}
        required = []
        for f in fields:
            ann = f.annotation
            if isinstance(ann, ast.Subscript) and ast.unparse(ann.value) == "ClassVar":
                continue
            schema, alias, _ = self.annotation(ann, stack)
            key = alias or f.target.id  # type: ignore[attr-defined]
            props[key] = schema
            if f.value is None:
                required.append(key)
        out: Obj = {"type": "object"}
        if props:
            out["properties"] = props
        if required:
            out["required"] = required
        for s in node.body:
            if isinstance(s, ast.Assign) and [ast.unparse(t) for t in s.targets] == ["model_config"]:
                if ast.unparse(s.value) != "ConfigDict(extra='allow')":
                    raise self.fail(f"{name}: model_config {ast.unparse(s.value)}")
                out["x-kubernetes-preserve-unknown-fields"] = True
        return out

    def annotation(self, ann: ast.AST, stack: Tuple[str, ...]) -> Tuple[Obj, Optional[str], bool]:
        """(schema, alias, may be None) of a field annotation: Annotated[..., Field(...)]
        carries the JSON name and the bounds, `A | B` becomes anyOf."""
        if isinstance(ann, ast.Subscript) and ast.unparse(ann.value) == "Annotated":
            inner, *metas = ann.slice.elts  # type: ignore[attr-defined]
            schema, _, optional = self.annotation(inner, stack)
            schema = dict(schema)
            alias = None
            for m in metas:
                if not (isinstance(m, ast.Call) and ast.unparse(m.func) == "Field") or m.args:
                    raise self.fail(f"metadata {ast.unparse(m)}")
                for kw in m.keywords:
                    value = ast.literal_eval(kw.value)
                    if kw.arg == "alias":
                        alias = value
                    elif kw.arg == "pattern":
                        if schema.get("type", "string") == "string":  # none on int quantities
                            schema["pattern"] = value
                    elif kw.arg in ("ge", "gt"):
                        schema["minimum"] = value
                        if kw.arg == "gt":
                            schema["exclusiveMinimum"] = True
                    elif kw.arg in ("le", "lt"):
                        schema["maximum"] = value
                        if kw.arg == "lt":
                            schema["exclusiveMaximum"] = True
                    elif kw.arg in ("min_length", "max_length"):
                        bound = "min" if kw.arg == "min_length" else "max"
                        words = {"string": "Length", "array": "Items", "object": "Properties"}
                        if schema.get("type") not in words:
                            raise self.fail(f"{kw.arg} on {ast.unparse(inner)}")
                        schema[bound + words[schema["type"]]] = value
                    elif kw.arg not in self.IGNORED_FIELD_ARGS:
                        raise self.fail(f"Field argument {kw.arg}")
            return schema, alias, optional
        if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
            parts: List[ast.AST] = []
            todo: List[ast.AST] = [ann]
            while todo:
                p = todo.pop(0)
                if isinstance(p, ast.BinOp) and isinstance(p.op, ast.BitOr):
                    todo[:0] = [p.left, p.right]
                else:
                    parts.append(p)
            optional = any(isinstance(p, ast.Constant) and p.value is None for p in parts)
            schemas = [self.annotation(p, stack)[0] for p in parts
                       if not (isinstance(p, ast.Constant) and p.value is None)]
            if not schemas:
                raise self.fail(f"{ast.unparse(ann)}")
            return (schemas[0] if len(schemas) == 1 else {"anyOf": schemas}), None, optional
        return self.type(ann, stack), None, False

    def type(self, ann: ast.AST, stack: Tuple[str, ...]) -> Obj:
        """The schema of a bare type: a scalar, a model class, list, dict[str, T] or Literal.
        Anything else is refused."""
        if isinstance(ann, ast.Name):
            if ann.id in self.SCALARS:
                return dict(self.SCALARS[ann.id])
            if ann.id in self.classes:
                return self.model(ann.id, stack)
        elif isinstance(ann, ast.Subscript):
            outer = ast.unparse(ann.value)
            if outer == "list":
                return {"type": "array", "items": self.annotation(ann.slice, stack)[0]}
            if outer == "dict" and isinstance(ann.slice, ast.Tuple) and len(ann.slice.elts) == 2 \
                    and ast.unparse(ann.slice.elts[0]) == "str":
                return {"type": "object",
                        "additionalProperties": self.annotation(ann.slice.elts[1], stack)[0]}
            if outer == "Literal":
                values = self.literals(ann)
                kinds = {type(v) for v in values}
                names = {str: "string", int: "integer", bool: "boolean", float: "number"}
                if len(kinds) != 1 or next(iter(kinds)) not in names:
                    raise self.fail(f"literal {ast.unparse(ann)}")
                return {"type": names[next(iter(kinds))], "enum": values}
        raise self.fail(f"type {ast.unparse(ann)}")


def models_to_schemas(wheel: Path, label: str) -> Dict[Tuple[str, str, str], Obj]:
    """The schema of every custom resource in a model wheel, by (group, version, kind), read
    from its generated modules without unpacking or importing anything."""
    out: Dict[Tuple[str, str, str], Obj] = {}
    with zipfile.ZipFile(wheel) as z:
        for member in sorted(z.namelist()):
            if MODEL_MODULE.fullmatch(member):
                out.update(ModelSource(z.read(member).decode("utf-8"), f"{label}: {member}")
                           .resources())
    return out

"""YAML documents with the line of every field, so problems can say `file:line`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import yaml


@dataclass(frozen=True, slots=True)
class Document:
    file: str
    index: int
    line: int
    data: object
    lines: dict[str, int]

    def line_of(self, path: str) -> int:
        """The line of `path`, or of its nearest parent that has one."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = _parent(path)
        return self.line


def _parent(path: str) -> str:
    cut = max(path.rfind("."), path.rfind("["))
    return path[:cut] if cut > 0 else ""


_STR, _MAP, _SEQ = "tag:yaml.org,2002:str", "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"
_MERGE = "tag:yaml.org,2002:merge"


class _Builder:
    """The data of a document and the line of every field, in one walk over its nodes.

    Plain strings, maps and lists (nearly all of a policy) are built here; every other node (a
    number, a boolean, a timestamp, a map with merge keys) by PyYAML's own SafeConstructor, so the
    data is what yaml.safe_load gives. A node met again through an alias is built and walked once:
    a document of nested aliases (a "billion laughs") costs what its nodes do, not what they
    expand to."""

    def __init__(self, loader: yaml.SafeLoader, lines: bool = True) -> None:
        self.loader = loader
        self.lines: dict[str, int] = {}
        self._built: dict[int, object] = {}
        self._with_lines = lines

    def build(self, node: yaml.Node, path: str) -> object:
        found = self._built.get(id(node), _NONE)
        if found is not _NONE:
            return found
        kind = type(node)
        if kind is yaml.ScalarNode and node.tag == _STR:
            value: object = node.value
        elif kind is yaml.MappingNode and node.tag == _MAP:
            mapping: dict[object, object] = {}
            self._built[id(node)] = mapping
            for key, item in node.value:
                if type(key) is not yaml.ScalarNode or key.tag == _MERGE:  # PyYAML's constructor decides
                    del self._built[id(node)]
                    return self._construct(node, path)
                name = ""
                if self._with_lines:
                    name = f"{path}.{key.value}" if path else str(key.value)
                    self.lines[name] = key.start_mark.line + 1
                mapping[key.value if key.tag == _STR else self.loader.construct_object(key)] = self.build(item, name)
            return mapping
        elif kind is yaml.SequenceNode and node.tag == _SEQ:
            items: list[object] = []
            self._built[id(node)] = items
            for i, item in enumerate(node.value):
                name = ""
                if self._with_lines:
                    name = f"{path}[{i}]"
                    self.lines[name] = item.start_mark.line + 1
                items.append(self.build(item, name))
            return items
        else:
            return self._construct(node, path)
        self._built[id(node)] = value
        return value

    def _construct(self, node: yaml.Node, path: str) -> object:
        """A number, a boolean, a timestamp, a map with merge keys, another tag: built by PyYAML's
        constructor, with the lines its nodes say."""
        value = self.loader.construct_object(node, deep=True)
        if self._with_lines and type(node) is not yaml.ScalarNode:
            self._record(node, path, set())
        self._built[id(node)] = value
        return value

    def _record(self, node: yaml.Node, path: str, seen: set[int]) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                name = f"{path}.{key.value}" if path else str(key.value)
                self.lines[name] = key.start_mark.line + 1
                self._record(value, name, seen)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                name = f"{path}[{i}]"
                self.lines[name] = item.start_mark.line + 1
                self._record(item, name, seen)


_NONE = object()


_RESOLVER = yaml.resolver.Resolver()


_PLAIN_TAGS: dict[str, str] = {}  # a plain scalar's text -> its tag; policies repeat their texts
_PLAIN_TAGS_MAX = 4096


def _plain_tag(value: str) -> str:
    """The tag YAML 1.1's implicit resolvers give a plain scalar: a function of its text alone (no
    path resolvers are registered)."""
    tag = _PLAIN_TAGS.get(value)
    if tag is None:
        tag = str(_RESOLVER.resolve(yaml.ScalarNode, value, (True, False)))  # type: ignore[no-untyped-call]
        if len(value) < 64 and len(_PLAIN_TAGS) < _PLAIN_TAGS_MAX:
            _PLAIN_TAGS[value] = tag
    return tag


def _fast(base: type) -> type:
    """`base` with its nodes' tags answered here: libyaml's parser asks the Python resolver for
    the tag of every node, a sixth of reading a policy. Without path resolvers the answer is a
    plain scalar's implicit tag (kept by text), else the default of the node's kind."""

    class Loader(base):  # type: ignore[misc]
        def resolve(self, kind: type, value: object, implicit: tuple[bool, bool]) -> str:
            if kind is yaml.ScalarNode:
                if not implicit[0]:  # quoted, or a block scalar: a string
                    return _STR
                tag = _PLAIN_TAGS.get(value)  # type: ignore[call-overload]
                return tag if tag is not None else _plain_tag(value)  # type: ignore[arg-type]
            return _MAP if kind is yaml.MappingNode else _SEQ

        # Called around every node; they keep the path only path resolvers read, and none is
        # registered (asserted below).
        def descend_resolver(self, current_node: object, current_index: object) -> None:
            pass

        def ascend_resolver(self) -> None:
            pass

    return Loader


# libyaml's parser (PyYAML's wheels carry it) reads policies about five times faster than the
# pure-Python one, with the same marks: the line of every field is the same (tests hold them to it).
FAST_LOADER: type = _fast(yaml.CSafeLoader) if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader
assert not yaml.SafeLoader.yaml_path_resolvers, "a path resolver makes a scalar's tag depend on where it is"


def read_documents(file: str, text: str, loader_class: type | None = None) -> list[Document]:
    """Every non-empty document of a YAML (or JSON) text. yaml.YAMLError propagates: where the
    fast parser fails, the text is read again with the pure-Python one, whose error (and line)
    is the one reported, so a broken file names the same line whichever parser read it."""
    loader_class = loader_class or FAST_LOADER
    try:
        return list(_documents(file, text, loader_class))
    except yaml.YAMLError:
        if loader_class is yaml.SafeLoader:
            raise
        return list(_documents(file, text, yaml.SafeLoader))


def _documents(file: str, text: str, loader_class: type, lines: bool = True) -> Iterator[Document]:
    loader = loader_class(text)
    try:
        index = 0
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                break
            builder = _Builder(loader, lines)
            data = builder.build(node, "")
            loader.constructed_objects, loader.recursive_objects = {}, {}  # as construct_document leaves it
            if data is not None:
                yield Document(file, index, node.start_mark.line + 1, data, builder.lines)
            index += 1
    finally:
        loader.dispose()


def read_data(text: str) -> list[object]:
    """Every non-empty document of a YAML (or JSON) text, as yaml.safe_load_all gives them, built
    the fast way (manifests: no lines kept). yaml.YAMLError propagates."""
    return [document.data for document in _documents("", text, FAST_LOADER, lines=False)]

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


def _record(node: yaml.Node, path: str, lines: dict[str, int]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            name = f"{path}.{key.value}" if path else str(key.value)
            lines[name] = key.start_mark.line + 1
            _record(value, name, lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            name = f"{path}[{i}]"
            lines[name] = item.start_mark.line + 1
            _record(item, name, lines)


# libyaml's parser (PyYAML's wheels carry it) reads policies about five times faster than the
# pure-Python one, with the same marks: the line of every field is the same (tests hold them to it).
FAST_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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


def _documents(file: str, text: str, loader_class: type) -> Iterator[Document]:
    loader = loader_class(text)
    try:
        index = 0
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                break
            lines: dict[str, int] = {}
            _record(node, "", lines)
            data = loader.construct_document(node)
            if data is not None:
                yield Document(file, index, node.start_mark.line + 1, data, lines)
            index += 1
    finally:
        loader.dispose()

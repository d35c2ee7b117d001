"""Reading a YAML file a person wrote (a board, a calibration): the text, its encoding and its syntax checked
in one place, each failure a reason its caller puts in its own sentence."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["MAX_VALUES", "YamlFileError", "load_yaml"]

#: the most values a file may stand for once its aliases are expanded
MAX_VALUES = 100_000


@dataclass
class YamlFileError(Exception):
    """Why a YAML file could not be read: ``reason`` ("does not exist", "cannot be read: …", "is not UTF-8
    text …", "is not YAML"); for a syntax error, where (1-based) and what the parser said."""

    reason: str
    line: int | None = None
    column: int | None = None
    problem: str | None = None

    def __str__(self) -> str:
        return self.reason


def load_yaml(path: str | Path) -> Any:
    """The data of the YAML file at ``path``, or :class:`YamlFileError`."""
    import yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise YamlFileError(f"is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except FileNotFoundError:
        raise YamlFileError("does not exist") from None
    except OSError as exc:
        raise YamlFileError(f"cannot be read: {exc.strerror}") from None
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node) > MAX_VALUES:
            # aliases of aliases: 430 bytes can stand for billions of values (a "billion laughs")
            raise YamlFileError(f"expands to more than {MAX_VALUES:,} values through its aliases (&/*); a board "
                                "or a calibration needs a few hundred")
        return loader.construct_document(node)
    except RecursionError:
        raise YamlFileError("nests too deeply to be a board or a calibration") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise YamlFileError("is not YAML", None if mark is None else mark.line + 1,
                            None if mark is None else mark.column + 1, str(getattr(exc, "problem", exc))) from None
    finally:
        loader.dispose()


def _expanded_size(root: Any) -> int:
    """The values ``root`` stands for with every alias expanded (a node an alias names counted each time),
    computed once per node; an alias cycle counts as unbounded."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: Any) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            return MAX_VALUES + 1  # a node that contains itself
        open_nodes.add(key)
        value = node.value
        total = 1
        if isinstance(value, list):
            for item in value:
                for child in item if isinstance(item, tuple) else (item,):
                    total += size(child)
                    if total > MAX_VALUES:
                        break
        open_nodes.discard(key)
        sizes[key] = total
        return total

    return size(root)

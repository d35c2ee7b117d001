"""Reading a YAML file a person wrote (a board, a calibration): the text, its encoding and its syntax checked
in one place, each failure a reason its caller puts in its own sentence."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["YamlFileError", "load_yaml"]


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
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise YamlFileError("is not YAML", None if mark is None else mark.line + 1,
                            None if mark is None else mark.column + 1, str(getattr(exc, "problem", exc))) from None

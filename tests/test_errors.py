"""Every exception class maiden defines is a ``MaidenError``, drawn in the tree of
``runtime/errors.py``: a new one cannot slip out of the tree, nor out of its drawing."""

from __future__ import annotations

import importlib
import re

import pytest

from runtime import MaidenError, errors
from tests.test_public_names import PACKAGES, modules


def _subclasses(cls: type[BaseException]) -> set[type[BaseException]]:
    found: set[type[BaseException]] = set()
    for sub in cls.__subclasses__():
        found |= {sub} | _subclasses(sub)
    return found


def ours() -> list[type[BaseException]]:
    """Every exception class defined in a module of ``PACKAGES``, each module imported."""
    for name in modules():
        importlib.import_module(name)
    return sorted((cls for cls in _subclasses(BaseException)
                   if cls.__module__.partition(".")[0] in PACKAGES),
                  key=lambda cls: f"{cls.__module__}.{cls.__qualname__}")


def test_the_walk_finds_errors_of_every_package() -> None:
    found = {cls.__module__.partition(".")[0] for cls in ours()}
    assert found == set(PACKAGES)


@pytest.mark.parametrize("cls", ours(), ids=lambda cls: f"{cls.__module__}.{cls.__qualname__}")
def test_every_exception_is_a_maiden_error_drawn_in_the_tree(cls: type[BaseException]) -> None:
    assert issubclass(cls, MaidenError), f"{cls.__module__}.{cls.__qualname__} is not a " \
                                         "MaidenError: put it under runtime/errors.py's tree"
    drawn = {"MaidenError", *re.findall(r"[├└]── (\w+)", errors.__doc__ or "")}
    assert cls.__name__ in drawn, f"{cls.__name__} is not drawn in runtime/errors.py's tree"

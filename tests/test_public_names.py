"""Every name in every ``__all__`` resolves, and ``from module import *`` works.

A name listed but never defined (a rename that missed ``__all__``) only fails
when someone star-imports the module or reads the docs; this finds it first.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

import pytest

PACKAGES = ("runtime", "channels", "schedules", "bot")


def modules() -> list[str]:
    """Every module and package under ``PACKAGES``, except ``__main__`` scripts."""
    found: list[str] = []
    for root in PACKAGES:
        package = importlib.import_module(root)
        found.append(root)
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{root}."):
            if info.name.rpartition(".")[2] != "__main__":
                found.append(info.name)
    return sorted(found)


def public_names(module: ModuleType) -> list[str]:
    names = module.__dict__.get("__all__")
    if names is None:
        pytest.skip(f"{module.__name__} has no __all__")
    assert isinstance(names, list | tuple), f"{module.__name__}.__all__ is {type(names)}"
    assert all(isinstance(name, str) for name in names), names
    return list(names)


def test_the_walk_finds_subpackages_and_modules() -> None:
    found = modules()
    assert {"runtime.providers.http", "channels.http.app", "bot.cli"} <= set(found)
    assert not [name for name in found if name.endswith("__main__")]


@pytest.mark.parametrize("name", modules())
def test_all_names_resolve(name: str) -> None:
    module = importlib.import_module(name)
    names = public_names(module)
    duplicates = sorted({n for n in names if names.count(n) > 1})
    assert not duplicates, f"{name}.__all__ lists {duplicates} more than once"
    missing = [n for n in names if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ lists {missing}, which it does not define"
    namespace: dict[str, object] = {}
    exec(f"from {name} import *", namespace)
    assert set(names) <= set(namespace), sorted(set(names) - set(namespace))

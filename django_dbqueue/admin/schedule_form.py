"""The stored-schedule form's suggestions: the tasks of the installed apps'
``tasks`` modules, and the time zones this system knows, offered in a
``<datalist>`` under the text field, so that neither has to be typed from
memory. A task in another allowed module, or a zone only some hosts know,
may still be typed; the model's own checks judge it, with one clear error."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import zoneinfo
from collections.abc import Callable
from typing import Any

from django import forms
from django.apps import apps
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString


class Suggesting(forms.TextInput):
    """A text field with a list of suggestions, read when the form renders."""

    def __init__(self, options: Callable[[], list[str]], attrs: dict[str, Any] | None = None) -> None:
        super().__init__({"class": "vTextField", **(attrs or {})})
        self.options = options

    def render(self, name: str, value: Any, attrs: Any = None, renderer: Any = None) -> SafeString:
        list_id = f"{(attrs or {}).get('id') or name}_options"
        field = super().render(name, value, {**(attrs or {}), "list": list_id}, renderer)
        options = format_html_join(
            "", '<option value="{}"></option>', ((option,) for option in self.options())
        )
        return format_html('{}<datalist id="{}">{}</datalist>', field, list_id, options)


def task_paths() -> list[str]:
    """The import paths of the tasks in each installed app's ``tasks``
    module (the usual place; importing it is what a worker does)."""
    from ..tasks_api import Task

    found = []
    for config in apps.get_app_configs():
        name = f"{config.name}.tasks"
        try:
            if importlib.util.find_spec(name) is None:
                continue
            module = importlib.import_module(name)
        except Exception:  # noqa: BLE001 (a module that does not import offers nothing; the check says why)
            continue
        found += [
            f"{name}.{attribute}"
            for attribute, value in vars(module).items()
            if isinstance(value, Task) and getattr(value, "module_path", "") == f"{name}.{attribute}"
        ]
    return sorted(found)


@functools.cache
def time_zones() -> list[str]:
    return sorted(zoneinfo.available_timezones())

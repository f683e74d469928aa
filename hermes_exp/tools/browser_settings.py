"""The browser toolset's one `settings` block (conf/toolset/browser.yaml), checked key by key.

A value is refused with the key, the value and the fix rather than coerced: `bool("no")` is true, so
`headless=no` used to keep a headless browser, and a URL pattern given as one string was read as a list
of its characters (`denied_urls=https://evil.example/*` denied every page, one without a `*` none)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hermes_exp.settings.sections import Section
from hermes_exp.errors import ConfigError

NAME = "toolsets.browser.settings"
DEFAULTS: dict[str, Any] = {
    "executable_path": "/usr/bin/chromium", "headless": True, "args": None, "allowed_urls": None,
    "denied_urls": None, "block_private": True, "action_timeout": 10, "navigation_timeout": 30,
    "launch_timeout": 60, "max_snapshot_chars": 15000, "vision_model": None,
}


@dataclass(frozen=True)
class BrowserSettings:
    launch: dict[str, Any]  # Chromium(**launch)
    policy: dict[str, Any]  # UrlPolicy(**policy)
    session: dict[str, Any]  # BrowserSession(chromium, policy, **session)
    vision_model: Any


def parse(settings: dict[str, Any] | None) -> BrowserSettings:
    section = Section(NAME, {**DEFAULTS, **dict(settings or {})}).only(DEFAULTS, "see conf/toolset/browser.yaml")
    path = section.raw["executable_path"]
    if not isinstance(path, str) or not path.strip():
        raise ConfigError(f"{NAME}.executable_path={path!r} must be the path of a Chromium executable",
                          f"apt-get install chromium, or set {NAME}.executable_path=/usr/bin/chromium")
    seconds = {key: section.number(key, DEFAULTS[key], positive=True, unit="seconds")
               for key in ("action_timeout", "navigation_timeout", "launch_timeout")}
    return BrowserSettings(
        launch={"executable_path": path, "headless": section.flag("headless", True),
                "args": _strings(section, "args"), "launch_timeout": float(seconds["launch_timeout"])},
        policy={"allowed": _strings(section, "allowed_urls"), "denied": _strings(section, "denied_urls"),
                "block_private": section.flag("block_private", True)},
        session={"action_timeout": float(seconds["action_timeout"]),
                 "navigation_timeout": float(seconds["navigation_timeout"]),
                 "max_snapshot_chars": section.number("max_snapshot_chars", DEFAULTS["max_snapshot_chars"],
                                                      integer=True, positive=True, unit="characters")},
        vision_model=section.raw["vision_model"])


def _strings(section: Section, key: str) -> list[str] | None:
    """A list of strings, or null; a lone string is refused (it would be read as its characters)."""
    value = section.raw.get(key)
    if value is None:
        return None
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return list(value)
    example = "['https://*.example.org/*']" if key.endswith("_urls") else "[--no-sandbox]"
    raise ConfigError(f"{section.path(key)}={value!r} must be a list of strings",
                      f"write it as a list, e.g. {section.path(key)}={example}")

"""The browser tools' JSON schemas: Hermes's names and arguments (tools/browser_tool.py), so trajectories
made here train the same tool calls."""

from __future__ import annotations

from typing import Any

_NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}, "required": []}


def _tool(name: str, description: str, properties: dict[str, Any] | None = None,
          required: list[str] | None = None) -> dict[str, Any]:
    params = {"type": "object", "properties": properties or {}, "required": required or []}
    return {"name": name, "description": description, "parameters": params if properties else dict(_NO_ARGS)}


_REF = {"type": "string", "description": "The element reference from the snapshot (e.g., '@e5', '@e12')"}
BROWSER_TOOLS: list[dict[str, Any]] = [
    _tool("browser_navigate",
          "Navigate to a URL in the browser. Initializes the session and loads the page. Must be called before "
          "other browser tools. For simple information retrieval, prefer web_search or web_extract (faster, "
          "cheaper). Use browser tools when you need to interact with a page (click, fill forms, dynamic "
          "content). Returns a compact page snapshot with interactive elements and ref IDs.",
          {"url": {"type": "string", "description": "The URL to navigate to (e.g., 'https://example.com')"}}, ["url"]),
    _tool("browser_snapshot",
          "Get a text-based snapshot of the current page's accessibility tree. Returns interactive elements with "
          "ref IDs (like @e1, @e2) for browser_click and browser_type. full=false (default): compact view with "
          "interactive elements. full=true: complete page content. Long snapshots are truncated. Requires "
          "browser_navigate first.",
          {"full": {"type": "boolean", "default": False,
                    "description": "If true, returns complete page content. If false (default), returns compact "
                                   "view with interactive elements only."}}),
    _tool("browser_click",
          "Click on an element identified by its ref ID from the snapshot (e.g., '@e5'). The ref IDs are shown in "
          "square brackets in the snapshot output. Requires browser_navigate and browser_snapshot to be called "
          "first.", {"ref": _REF}, ["ref"]),
    _tool("browser_type",
          "Type text into an input field identified by its ref ID. Clears the field first, then types the new "
          "text. Requires browser_navigate and browser_snapshot to be called first.",
          {"ref": {**_REF, "description": "The element reference from the snapshot (e.g., '@e3')"},
           "text": {"type": "string", "description": "The text to type into the field"}}, ["ref", "text"]),
    _tool("browser_scroll",
          "Scroll the page in a direction. Use this to reveal more content that may be below or above the "
          "current viewport. Requires browser_navigate to be called first.",
          {"direction": {"type": "string", "enum": ["up", "down"], "description": "Direction to scroll"}},
          ["direction"]),
    _tool("browser_back", "Navigate back to the previous page in browser history. Requires browser_navigate to be "
                          "called first."),
    _tool("browser_press",
          "Press a keyboard key. Useful for submitting forms (Enter), navigating (Tab), or keyboard shortcuts. "
          "Requires browser_navigate to be called first.",
          {"key": {"type": "string", "description": "Key to press (e.g., 'Enter', 'Tab', 'Escape', 'ArrowDown')"}},
          ["key"]),
    _tool("browser_get_images",
          "Get a list of all images on the current page with their URLs and alt text. Useful for finding images "
          "to analyze with the vision tool. Requires browser_navigate to be called first."),
    _tool("browser_vision",
          "Take a screenshot of the current page and analyze it with vision AI. Use this when you need to visually "
          "understand what's on the page - especially useful for CAPTCHAs, visual verification challenges, complex "
          "layouts, or when the text snapshot doesn't capture important visual information. Returns both the AI "
          "analysis and a screenshot_path that you can share with the user by including MEDIA:<screenshot_path> "
          "in your response. Requires browser_navigate to be called first.",
          {"question": {"type": "string", "description": "What you want to know about the page visually. Be "
                                                         "specific about what you're looking for."},
           "annotate": {"type": "boolean", "default": False,
                        "description": "If true, overlay numbered [N] labels on interactive elements. Each [N] maps "
                                       "to ref @eN for subsequent browser commands. Useful for QA and spatial "
                                       "reasoning about page layout."}}, ["question"]),
    _tool("browser_console",
          "Get browser console output and JavaScript errors from the current page. Returns console.log/warn/"
          "error/info messages and uncaught JS exceptions. Requires browser_navigate to be called first. When "
          "'expression' is provided, evaluates JavaScript in the page context and returns the result.",
          {"clear": {"type": "boolean", "default": False,
                     "description": "If true, clear the message buffers after reading"},
           "expression": {"type": "string",
                          "description": "JavaScript expression to evaluate in the page context. Return values are "
                                         "serialized to JSON. Example: 'document.title'"}}),
]
SCHEMAS: dict[str, dict[str, Any]] = {tool["name"]: tool for tool in BROWSER_TOOLS}

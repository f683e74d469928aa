"""Toolset `vision`: `vision_analyze` sends an image (an http(s) URL, fetched on the runner's side, or a
file from the prompt's sandbox), base64-encoded, and a question to a vision-capable model, through the
run's model client: each call is retried, rate-limited, priced, counted in the run's budget and the
task's cap, and its usage is kept with the sample (`tool_model_calls`)."""

from __future__ import annotations

import base64
from typing import Any

from hermes_exp.errors import ProviderError, ToolError
from hermes_exp.tools import fetch
from hermes_exp.tools.base import ToolContext, function_schema, text_arg

VISION_ANALYZE = function_schema(
    "vision_analyze", "Look at an image and answer a question about it.",
    {"image_url": {"type": "string", "description": "An http(s) URL, or the path of an image file in your "
                                                    "working directory."},
     "question": {"type": "string", "description": "What you want to know about the image."}},
    ["image_url", "question"])
_MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF87a", "image/gif"),
          (b"GIF89a", "image/gif"))


def sniff_image(data: bytes) -> str | None:
    """The image type from the first bytes (never from a name or a header that may lie)."""
    for magic, mime in _MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


class VisionAnalyze:
    """`model`: null sends to the run's own model (it must accept images); or settings merged over the
    run's model config (e.g. `{name: openai/gpt-4o}`), called on the run's provider with its key."""

    schema = VISION_ANALYZE

    def __init__(self, model: dict[str, Any] | None = None, max_image_bytes: int = 5_000_000,
                 timeout: float = 30.0, block_private: bool = True) -> None:
        self.model, self.max_image_bytes = model, int(max_image_bytes)
        self.timeout, self.block_private = float(timeout), bool(block_private)

    def missing(self, mock: bool) -> str | None:
        if self.model is not None and not (isinstance(self.model, dict) and self.model.get("name")):
            return "toolsets.vision.tools.vision_analyze.model must be null or a mapping with a `name`"
        return None

    def __call__(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        source = text_arg(args, "image_url")
        question = text_arg(args, "question")
        return self.analyze(ctx, question, self._load(ctx, source), source)

    def analyze(self, ctx: ToolContext, question: str, data: bytes, source: str,
                tool: str = "vision_analyze") -> dict[str, Any]:
        """Ask the vision model `question` about the image `data` (also what browser_vision sends)."""
        mime = sniff_image(data)
        if mime is None:
            raise ToolError(f"{source} is not a PNG, JPEG, GIF or WebP image")
        url = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
        messages = [{"role": "user", "content": [{"type": "text", "text": question},
                                                 {"type": "image_url", "image_url": {"url": url}}]}]
        try:
            reply = self._complete(ctx, messages, tool)
        except ProviderError as exc:
            if exc.transient or exc.stop_run or exc.error_class == "budget":
                raise  # the task fails (and is retried) rather than look done without its tool
            raise ToolError(f"the vision model refused the request: {exc}") from exc
        ctx.model_calls.append({**reply.usage, "served_by": reply.served_by, "attempts": reply.attempts,
                                "tool": tool})
        content = reply.message.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if not content:
            raise ToolError("the vision model gave an empty answer")
        return {"analysis": content, "image": source, "mime_type": mime, "error": None}

    def _load(self, ctx: ToolContext, source: str) -> bytes:
        if source.startswith(("http://", "https://")):
            page = fetch.get(ctx, source, timeout=self.timeout, max_bytes=self.max_image_bytes,
                             max_redirects=5, block_private=self.block_private, headers={"Accept": "image/*"})
            return page.body
        data = ctx.sandbox.read_file(source)
        if len(data) > self.max_image_bytes:
            raise ToolError(f"{source} is {len(data):,} bytes, over max_image_bytes={self.max_image_bytes:,}")
        return data

    def _complete(self, ctx: ToolContext, messages: list[dict[str, Any]], tool: str) -> Any:
        if ctx.model is None:
            raise ToolError(f"{tool} has no model client in this context")
        if self.model is None:
            return ctx.model.complete(messages, [])
        client = ctx.resources.get(f"vision-model:{self.model['name']}", lambda: self._client(ctx))
        return client.complete(messages, [], ctx.model.meter)

    def _client(self, ctx: ToolContext) -> Any:
        """Another model's client, booked with the agent's (agent/clients.py)."""
        from hermes_exp.model.clients import second_client

        settings = ctx.settings
        return second_client(settings, {**settings["model"], **self.model}, settings["provider"],
                             shared=ctx.model.client)

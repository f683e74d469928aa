"""Toolset `image_gen`: `image_generate` against an OpenAI-images-compatible endpoint; the image is
saved in the prompt's sandbox working directory and its path returned.

Request: `POST {url}` JSON `{"model", "prompt", "n": 1, "size"}` (+ `response_format` when set), header
`Authorization: Bearer KEY`. Response: `{"data": [{"b64_json": ...} | {"url": ...}, "revised_prompt"?]}`;
a `url` is downloaded on the runner's side (size-capped)."""

from __future__ import annotations

import base64
import binascii
import os
import posixpath
from typing import Any

from hermes_exp.errors import ToolError
from hermes_exp.tools import fetch
from hermes_exp.tools.base import ToolContext, function_schema, text_arg
from hermes_exp.tools.vision import sniff_image

IMAGE_GENERATE = function_schema(
    "image_generate", "Generate an image from a text description; it is saved as a file in your working "
    "directory and its path is returned.",
    {"prompt": {"type": "string", "description": "What the image should show."},
     "filename": {"type": "string", "description": "Optional file name (saved under the output folder)."}},
    ["prompt"])


class ImageGenerate:
    schema = IMAGE_GENERATE
    mock_path = "/v1/images/generations"

    def __init__(self, url: str | None = None, api_key_env: str | None = None, model: str = "gpt-image-1",
                 size: str = "1024x1024", response_format: str | None = None, timeout: float = 120.0,
                 max_bytes: int = 20_000_000, output_dir: str = "images", block_private: bool = True) -> None:
        self.url, self.api_key_env, self.model, self.size = url, api_key_env, model, size
        self.response_format, self.timeout, self.max_bytes = response_format, float(timeout), int(max_bytes)
        self.output_dir, self.block_private = output_dir, bool(block_private)

    def missing(self, mock: bool) -> str | None:
        if not self.url and not mock:
            return ("no images endpoint: set toolsets.image_gen.tools.image_generate.url (e.g. "
                    "https://api.openai.com/v1/images/generations)")
        if self.url and self.api_key_env and not os.environ.get(self.api_key_env):
            return f"needs an API key: export {self.api_key_env}=..."
        return None

    def __call__(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        prompt = text_arg(args, "prompt")
        name = posixpath.basename(str(args.get("filename") or "")) or None
        item = self._request(ctx, prompt)
        data = self._image_bytes(ctx, item)
        mime = sniff_image(data)
        if mime is None:
            raise ToolError("the images endpoint returned data that is not a PNG, JPEG, GIF or WebP image")
        path = self._free_path(ctx, name, mime)
        ctx.sandbox.write_file(path, data)
        return {"path": path, "bytes": len(data), "mime_type": mime,
                "revised_prompt": item.get("revised_prompt"), "error": None}

    def _request(self, ctx: ToolContext, prompt: str) -> dict[str, Any]:
        url = self.url or ((ctx.services or "") + self.mock_path)
        body = {"model": self.model, "prompt": prompt, "n": 1, "size": self.size}
        if self.response_format:
            body["response_format"] = self.response_format
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        answer = fetch.json_call(fetch.client(ctx), "POST", url, "images endpoint", self.timeout, json=body,
                                 headers=headers)
        try:
            item = (answer.get("data") or [None])[0]
        except (AttributeError, IndexError, TypeError) as exc:
            raise ToolError("the images endpoint did not answer with {\"data\": [...]}") from exc
        if not isinstance(item, dict) or not (item.get("b64_json") or item.get("url")):
            raise ToolError("the images endpoint answered without an image (no b64_json or url)")
        return item

    def _image_bytes(self, ctx: ToolContext, item: dict[str, Any]) -> bytes:
        if item.get("b64_json"):
            try:
                data = base64.b64decode(item["b64_json"], validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ToolError("the images endpoint returned invalid base64") from exc
            if len(data) > self.max_bytes:
                raise ToolError(f"the generated image is {len(data):,} bytes, over max_bytes={self.max_bytes:,}")
            return data
        page = fetch.get(ctx, item["url"], timeout=self.timeout, max_bytes=self.max_bytes, max_redirects=3,
                         block_private=self.block_private)
        return page.body

    def _free_path(self, ctx: ToolContext, name: str | None, mime: str) -> str:
        ext = {"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp"}[mime]
        if name:
            stem = posixpath.splitext(name)[0]
            return posixpath.join(self.output_dir, stem + ext)
        for n in range(1, 10_000):
            candidate = posixpath.join(self.output_dir, f"image_{n}{ext}")
            try:
                ctx.sandbox.read_file(candidate)
            except ToolError:  # not there yet
                return candidate
        raise ToolError(f"{self.output_dir} already holds 9999 images")

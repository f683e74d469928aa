"""One asyncio event loop in a daemon thread, for async-only clients (Playwright, the MCP SDK) that the
thread-pool workers call synchronously. Coroutines stay on that loop, so objects bound to it stay valid."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coro` on the loop and wait for it; on timeout it is cancelled and TimeoutError raised."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("LoopThread.run called from its own loop (it would deadlock)")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no answer within {timeout:g}s") from None

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the loop after cancelling what still runs on it. Safe to call twice."""
        if not self._thread.is_alive():
            return

        async def cancel_rest() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(cancel_rest(), self.loop).result(timeout)
        except Exception:  # noqa: BLE001 - stopping must not fail because a task misbehaved
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()

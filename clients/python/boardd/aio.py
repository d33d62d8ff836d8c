"""asyncio for the worker (DESIGN §19): AsyncWorker runs `async def handler(job)` coroutines
on the caller's event loop while the claiming, renewing and filing machinery of Worker runs on
its threads. When the claim is lost the handler's task is cancelled (CancelledError at its next
await), as well as job.cancelled being set. The job's blocking writes are reached with
`await asyncio.to_thread(job.comment, ...)`."""
import asyncio
import concurrent.futures
import signal
import threading

from .errors import ClaimLost
from .worker import Worker

__all__ = ['AsyncWorker']


class AsyncWorker:
    """AsyncWorker(client, board, handler, concurrency=N, ...): the arguments of Worker, with
    `handler` an async function. `await worker.run()`; worker.stop() from anywhere."""

    def __init__(self, client, board, handler, **kw):
        self._handler = handler
        self._loop = None
        self.worker = Worker(client, board, self._call, **kw)

    @property
    def stats(self):
        return dict(self.worker.stats)

    def _call(self, job):
        started, ended = threading.Event(), threading.Event()

        async def handle():
            started.set()
            try:
                return await self._handler(job)
            finally:
                ended.set()

        fut = asyncio.run_coroutine_threadsafe(handle(), self._loop)
        job.on_cancel(fut.cancel)
        try:
            return fut.result()
        except concurrent.futures.CancelledError:
            # The future reads cancelled at once; the handler's task runs its own cleanup
            # (its `except CancelledError`) to its end first: the job is not over before it.
            # A task cancelled before it began never runs at all (nothing to wait for).
            if started.wait(0.5):
                ended.wait()
            raise ClaimLost(0, 'claim_lost', 'card %s: %s' % (job.id, job.cancel_reason)) \
                from None

    def stop(self):
        self.worker.stop()

    async def run(self, max_jobs=None, handle_signals=True):
        """Works until stop(), SIGTERM/SIGINT (when handle_signals), or max_jobs; the stats.
        Cancelled (a timeout, a task group ending), it stops as stop() does — no new claims,
        the running handlers their grace, the claims released — and raises CancelledError once
        the worker's threads are done: its handlers need this loop until then."""
        self._loop = asyncio.get_running_loop()
        sigs = []
        if handle_signals:
            for s in (signal.SIGTERM, signal.SIGINT):
                try:
                    self._loop.add_signal_handler(s, self.stop)
                    sigs.append(s)
                except (NotImplementedError, RuntimeError):
                    pass
        run = asyncio.ensure_future(asyncio.to_thread(self.worker.run, max_jobs, False))
        try:
            return await asyncio.shield(run)
        except asyncio.CancelledError:
            self.stop()
            while not run.done():
                try:
                    await asyncio.shield(run)
                except asyncio.CancelledError:
                    continue  # cancelled again: still the same stop
                except Exception:  # noqa: BLE001 - the cancel is what is raised
                    break
            raise
        finally:
            for s in sigs:
                self._loop.remove_signal_handler(s)

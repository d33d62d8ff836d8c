"""boardd's Python client and worker (DESIGN §19): Client (the REST contract, one method per
route), Worker (claim-next, renew, run, file, release; cancelled on loss of the claim),
AsyncWorker (the same for `async def` handlers) and the problem codes as exceptions."""
from .errors import *  # noqa: F401,F403
from .errors import __all__ as _errors_all
from .client import Client, route, rfc3339
from .worker import Job, Retry, Worker
from .aio import AsyncWorker

__version__ = '0.1.0'
__all__ = ['Client', 'route', 'rfc3339', 'Worker', 'AsyncWorker', 'Job', 'Retry'] + list(_errors_all)

"""Following a job outlives AWS's passing refusals: a throttled or failed read is asked again with a doubling
delay (after botocore's own retries gave up), and only when it keeps failing does `watch` stop, with its own
exit code (EXIT_NOT_FOLLOWED) so that a script tells "trainctl could not follow the job" from "the job failed"
(exit 1)."""
from __future__ import annotations

import time
from typing import Any, Callable, TypeVar

from trainctl.errors import TrainctlError

EXIT_NOT_FOLLOWED = 5
# Error codes AWS answers for a refusal that passes (throttling, an overloaded or failing service endpoint).
TRANSIENT_CODES = ("Throttling", "ThrottlingException", "ThrottledException", "RequestLimitExceeded",
                   "TooManyRequestsException", "RequestThrottled", "RequestThrottledException", "SlowDown",
                   "ServiceUnavailable", "ServiceUnavailableException", "InternalFailure", "InternalError",
                   "InternalServerError", "InternalServerException", "RequestTimeout", "RequestTimeoutException")
# botocore's exceptions for no answer at all, by name (no botocore import here)
NO_ANSWER = ("EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "ConnectionClosedError")
ATTEMPTS = 8           # in all, the first included: with the default 2 s interval about four minutes of patience
MAX_DELAY_S = 60.0

T = TypeVar("T")


def is_transient(e: BaseException) -> bool:
    from trainctl.aws.clients import error_code

    if type(e).__name__ in NO_ANSWER:
        return True
    status = (getattr(e, "response", None) or {}).get("ResponseMetadata", {}).get("HTTPStatusCode") \
        if isinstance(getattr(e, "response", None), dict) else None
    return error_code(e) in TRANSIENT_CODES or (isinstance(status, int) and status >= 500)


def patiently(call: Callable[[], T], job_id: str, first_delay: float, say: Callable[[str], None],
              sleep: Callable[[float], Any] = time.sleep) -> T:
    """call(), asked again while AWS refuses it in passing; TrainctlError(EXIT_NOT_FOLLOWED) when it keeps
    refusing or fails otherwise (a TrainctlError of the backend, such as an unknown job, passes as it is)."""
    from trainctl.aws.clients import error_summary, unreachable_endpoint

    delay = max(first_delay, 0.05)
    for attempt in range(ATTEMPTS):
        try:
            return call()
        except TrainctlError:
            raise
        except Exception as e:  # noqa: BLE001 - sorted into passing and lasting
            if (down := unreachable_endpoint(e)) is not None:
                # nothing listens at the endpoint the environment names (a stopped sandbox): asking again for
                # minutes would not start it; said at once, as every other command says it
                raise TrainctlError(f"trainctl could not follow {job_id}: {down}", EXIT_NOT_FOLLOWED) from e
            last = attempt == ATTEMPTS - 1
            if not is_transient(e) or last:
                why = f"after {ATTEMPTS} tries " if last and is_transient(e) else ""
                raise TrainctlError(f"trainctl could not follow {job_id} {why}({error_summary(e)}); the job itself "
                                    f"is not affected: `trainctl watch {job_id}` again", EXIT_NOT_FOLLOWED) from e
            say(f"{error_summary(e)}; asking again in {delay:g} s")
            sleep(delay)
            delay = min(delay * 2, MAX_DELAY_S)
    raise AssertionError("unreachable: the loop returns or raises")

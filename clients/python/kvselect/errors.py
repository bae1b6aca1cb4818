"""Errors of the kvselect client."""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Optional

from . import wire


class KvselectError(Exception):
    """An error answer of a kvselect node.

    code is the API's machine-readable code (kvselect.wire.CODE_*); an
    answer without one gets a code derived from its status.
    after_unknown_outcome is set when the answer came to a retry of a
    catalog write whose first attempt had an unknown outcome: a not_found
    from a delete then most likely means the first attempt deleted it.
    retry_after is the answer's Retry-After header as sent (the node sets
    it on a 503 or 429 a retry may mend: "1"), or None: a caller relaying
    the error (a load-shedding 503) passes it on.
    """

    def __init__(self, method: str, url: str, status: int, code: str, message: str,
                 after_unknown_outcome: bool = False, retry_after: Optional[str] = None) -> None:
        super().__init__(f"{method} {url}: {code}: {message} (HTTP {status})")
        self.method = method
        self.url = url
        self.status = status
        self.code = code
        self.message = message
        self.after_unknown_outcome = after_unknown_outcome
        self.retry_after = retry_after

    @property
    def unknown_partition(self) -> bool:
        """The catalog never held a worker for the request's model_name and
        tenant_id (wire.CODE_UNKNOWN_PARTITION): most likely a misspelt name,
        which no retry mends, unlike wire.CODE_NOT_READY (an outage: retry
        later or elsewhere). Both are HTTP 503."""
        return self.code == wire.CODE_UNKNOWN_PARTITION


class TransportError(Exception):
    """No answer: the node could not be reached, or the answer was lost.

    sent tells whether the request may have reached a node (after which a
    booking may or may not have happened)."""

    def __init__(self, message: str, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


def decode_error(method: str, url: str, status: int, body: bytes) -> KvselectError:
    """Reads an error answer: {"error", "code"}, or the load-shedding body
    {"message", "type", "code": 503}; anything else keeps the status text."""
    code: Optional[str] = None
    message = ""
    try:
        doc = json.loads(body)
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        if isinstance(doc.get("code"), str) and doc["code"]:
            code, message = doc["code"], str(doc.get("error", ""))
        elif doc.get("type") == wire.BUSY_TYPE:
            code, message = wire.CODE_OVERLOADED, str(doc.get("message", ""))
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = f"HTTP {status}"
    if not code:
        code = phrase.lower().replace(" ", "_").replace("-", "_")
    if not message:
        message = " ".join(body.decode("utf-8", "replace").split())[:200] or phrase
    return KvselectError(method, url, status, code, message)

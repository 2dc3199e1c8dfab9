"""The API's request and response bodies as pydantic models, one per schema of GET /v1/openapi.json.

Written by hand for readable names and docstrings, and checked against the committed copy of the
document (``openapi.json`` beside ``pyproject.toml``) by ``tests/test_openapi_models.py``: a field
added, removed, retyped or made optional there fails the test until the models follow.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, PrivateAttr

GenerationStatus = Literal["queued", "succeeded", "failed", "rejected"]
TERMINAL_STATUSES: frozenset[str] = frozenset({"succeeded", "failed", "rejected"})

ErrorCode = Literal[
    "invalid_request",
    "unauthorized",
    "insufficient_credits",
    "key_spend_limit_exceeded",
    "payment_required",
    "api_access_disabled",
    "key_model_not_allowed",
    "key_read_only",
    "not_found",
    "method_not_allowed",
    "not_acceptable",
    "request_timeout",
    "idempotency_conflict",
    "open_batch_limit_exceeded",
    "batch_lines_limit_exceeded",
    "length_required",
    "payload_too_large",
    "unsupported_media_type",
    "rate_limited",
    "concurrency_limit_exceeded",
    "wait_limit_exceeded",
    "stream_limit_exceeded",
    "not_cancelable",
    "internal_error",
    "service_unavailable",
]


class ApiModel(BaseModel):
    """Fields a newer API adds are kept (``extra``), so an old client reads a new server."""

    model_config = ConfigDict(extra="allow")


class ImageOutput(ApiModel):
    url: str
    width: int
    height: int


class VideoOutput(ApiModel):
    url: str
    width: int
    height: int
    duration_seconds: float
    has_audio: bool
    content_type: str


class GenerationOutput(ApiModel):
    images: list[ImageOutput] | None = None
    videos: list[VideoOutput] | None = None


class GenerationError(ApiModel):
    """A failed or rejected generation's error: ``code`` (generation_failed, canceled, ...), ``message``."""

    code: str
    message: str


class Generation(ApiModel):
    """A generation, the same shape at every stage (create, get, list item, replay)."""

    id: str
    status: GenerationStatus
    model: str
    media_type: str
    credits: int
    credits_refunded: bool
    input: dict[str, Any] | None
    output: GenerationOutput | None
    error: GenerationError | None
    created_at: datetime
    completed_at: datetime | None
    expires_at: datetime | None
    content_expired: bool
    # The provider serving it, or that served it; None before submission.
    provider: str | None
    # The batch this generation is a line of, and that line's custom_id; None for one made on its own.
    batch_id: str | None
    custom_id: str | None
    # Its Cancel-After deadline (created_at plus the header's duration); None without one.
    cancel_after: datetime | None

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


class KeyedGeneration(Generation):
    """A generation as ``create`` and ``run`` return it: ``idempotency_key`` names the key it was made
    with. The key is not part of the generation's JSON (``model_dump`` gives the API's fields only)."""

    _idempotency_key: str = PrivateAttr(default="")

    @property
    def idempotency_key(self) -> str:
        return self._idempotency_key

    @classmethod
    def keyed(cls, generation: Generation, idempotency_key: str) -> KeyedGeneration:
        keyed = cls.model_validate(generation.model_dump())
        keyed._idempotency_key = idempotency_key
        return keyed


class GenerationList(ApiModel):
    """One page of GET /v1/generations, newest first; ``next_cursor`` is None on the last page."""

    data: list[Generation]
    next_cursor: str | None


GenerationEventType = Literal[
    "generation.created",
    "generation.processing",
    "generation.succeeded",
    "generation.failed",
    "generation.rejected",
    "generation.refunded",
    "generation.requeued",
    "generation.updated",
    "generation.content_expired",
]


class GenerationEvent(ApiModel):
    """One entry of a generation's event log (GET /v1/generations/{id}/events), and a webhook's body:
    ``id`` is unique within the generation and increasing; ``data`` is the generation as it was then."""

    id: int
    type: GenerationEventType
    created_at: datetime
    data: Generation


class AccountEvent(ApiModel):
    """An event of the account (GET /v1/events): ``event``, the object a generation's stream gives
    (``event.data.id`` is the generation's id), under ``cursor``, the place to resume after it
    (``events(last_event_id=item.cursor)``). From the stream, ``raw`` is also the event's JSON text
    exactly as the API sent it (the bytes a webhook delivery of it carries); it is not part of the
    model's JSON (``model_dump`` gives the API's fields only)."""

    cursor: str
    #: A generation's event, a batch's (``batch.created``, ``batch.progress``, ``batch.completed``…),
    #: or a key's (``key.spend_limit_reached``).
    event: GenerationEvent | BatchEvent | KeyEvent
    _raw: str = PrivateAttr(default="")

    @property
    def raw(self) -> str:
        return self._raw

    @classmethod
    def streamed(cls, cursor: str, raw: str) -> AccountEvent:
        parsed = cast("dict[str, Any]", json.loads(raw))
        kind = BatchEvent if str(parsed.get("type", "")).startswith("batch.") else GenerationEvent
        item = cls(cursor=cursor, event=kind.model_validate(parsed))
        item._raw = raw
        return item


class KeyEventData(ApiModel):
    """A key's limit as it stood when a request was first refused by it in a window."""

    id: str
    name: str | None
    prefix: str
    spend_limit: int
    limit_reset: Literal["daily", "weekly", "monthly", "none"]
    limit_remaining: int
    resets_at: datetime | None
    model: str
    price: int


class KeyEvent(ApiModel):
    """A key's event in the account's stream: ``key.spend_limit_reached``, once per key and window."""

    id: int
    type: Literal["key.spend_limit_reached"]
    created_at: datetime
    data: KeyEventData


class AccountEventList(ApiModel):
    """A page of the account's events (GET /v1/events as JSON), oldest first; ``next_cursor`` is
    where the next page (or a stream) starts."""

    data: list[AccountEvent]
    next_cursor: str
    has_more: bool


class WebhookSubscription(ApiModel):
    """A create request's ``webhook``: where the generation's events are delivered, signed per
    Standard Webhooks 1.0 (``events``: the types delivered; default the terminal ones)."""

    url: str
    events: list[GenerationEventType] | None = None


class GenerationEventList(ApiModel):
    """The event log so far, oldest first."""

    data: list[GenerationEvent]


class WebhookPreviousSecret(ApiModel):
    secret: str
    expires_at: datetime


class WebhookSecret(ApiModel):
    """The account's webhook signing secret (``whsec_…``), and the one a rotation replaced, while it signs."""

    secret: str
    created_at: datetime
    previous: WebhookPreviousSecret | None


class CreditBalance(ApiModel):
    credits: int
    subscription_credits: int
    one_time_credits: int


class ModelOption(ApiModel):
    type: Literal["enum", "integer_enum", "boolean", "image"]
    description: str
    values: list[str | int | float] | None = None
    default: bool | int | float | str | None = None
    descriptions: dict[str, str] | None = None
    unit: str | None = None
    requires: str | None = None


class ModelPrompt(ApiModel):
    min_length: int
    max_length: int


class ModelPricing(ApiModel):
    """price = (credits[value of ``by``, or "*"] + each matching surcharge) x (duration if unit is second)."""

    unit: Literal["generation", "second"]
    by: str | None
    credits: dict[str, int]
    surcharges: dict[str, dict[str, int]]


class Model(ApiModel):
    """A model of GET /v1/models: options, allowed values, defaults, prices and its request JSON Schema."""

    id: str
    name: str
    description: str
    media_type: Literal["image", "video"]
    max_images: int
    accepts_data_uris: bool
    unknown_fields: Literal["reject", "ignore"]
    prompt: ModelPrompt
    options: dict[str, ModelOption]
    pricing: ModelPricing
    default_price: int
    request_schema: dict[str, Any]


class ModelList(ApiModel):
    data: list[Model]


class QuoteBalance(ApiModel):
    subscription: int
    one_time: int
    total: int


class KeyLimit(ApiModel):
    """A key's own spend limit now, as a quote gives it."""

    spend_limit: int
    limit_reset: Literal["daily", "weekly", "monthly", "none"]
    limit_remaining: int
    resets_at: datetime | None


class Quote(ApiModel):
    """POST /v1/generations/quote: what a create with this body would cost, and whether it is affordable."""

    model: str
    credits: int
    # The provider that would serve a create with this body now; None: none takes requests now.
    provider: str | None
    balance: QuoteBalance
    # Whether the balance and what is left of the key's spend limit both cover it now.
    affordable: bool
    # Which bound refuses it ("balance" or "key_spend_limit"); None when affordable.
    limited_by: Literal["balance", "key_spend_limit"] | None
    key_limit: KeyLimit | None


class KeySpend(ApiModel):
    """Credits a key spent (debits less refunds) this UTC day, ISO week, month and in all."""

    today: int
    this_week: int
    this_month: int
    total: int


class ApiKey(ApiModel):
    """GET /v1/key: the key in use: its access, models, spend limit (what is left, when it resets), spend."""

    id: str
    kind: Literal["key", "oauth"]
    name: str | None
    prefix: str
    access: Literal["full", "read_only"]
    # None: every model, present and future.
    models: list[str] | None
    # None: no limit of its own (the balance is the bound).
    spend_limit: int | None
    limit_reset: Literal["daily", "weekly", "monthly", "none"]
    limit_remaining: int | None
    resets_at: datetime | None
    spend: KeySpend
    created_at: datetime


class ValidationIssue(ApiModel):
    """One offending field of a 400 invalid_request."""

    field: str
    code: str
    message: str


class ErrorDetail(ApiModel):
    code: ErrorCode
    message: str


class ErrorBody(ApiModel):
    """The error envelope of every error answer."""

    error: ErrorDetail
    issues: list[ValidationIssue] | None = None


class ValidationErrorDetail(ApiModel):
    code: Literal["invalid_request"]
    message: str


class ValidationErrorBody(ApiModel):
    error: ValidationErrorDetail
    issues: list[ValidationIssue]


class NotCancelableDetail(ApiModel):
    code: Literal["not_cancelable"]
    message: str


class NotCancelableBody(ApiModel):
    error: NotCancelableDetail
    generation: Generation


class GenerationRequest(ApiModel):
    """The body of POST /v1/generations (and of a quote): a model id and that model's fields at the
    top level (each model's fields are in its ``request_schema``; extra keyword fields are sent as given)."""

    model: str
    prompt: str
    images: list[str] | None = None


#: The document's component schemas and the model for each (the per-model request schemas,
#: ``GenerationRequest_<model>``, belong to one deployment's catalog: GenerationRequest takes any).
BatchStatus = Literal["validating", "in_progress", "completed", "canceling", "canceled", "expired"]
BATCH_TERMINAL_STATUSES: frozenset[str] = frozenset({"completed", "canceled", "expired"})


class BatchRequestCounts(ApiModel):
    """A batch's lines by where they stand: ``pending`` (not started), ``queued`` (running), then how
    each ended: a generation status, ``refused`` (no generation), ``canceled`` or ``expired`` (never
    started, never charged)."""

    total: int
    pending: int
    queued: int
    succeeded: int
    failed: int
    rejected: int
    refused: int
    canceled: int
    expired: int


class Batch(ApiModel):
    """GET /v1/batches/{id}: a batch, its lines counted, and the credits it spent so far."""

    id: str
    status: BatchStatus
    completion_window: str
    request_counts: BatchRequestCounts
    credits_quoted: int
    credits_spent: int
    metadata: dict[str, str] | None
    created_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    expires_at: datetime

    @property
    def is_terminal(self) -> bool:
        return self.status in BATCH_TERMINAL_STATUSES


class BatchList(ApiModel):
    """One page of GET /v1/batches, newest first; ``next_cursor`` is None on the last page."""

    data: list[Batch]
    next_cursor: str | None


class BatchQuote(ApiModel):
    """POST /v1/batches/quote: the lines checked as a create checks them, their total at each line's
    price now, and whether the balance covers it."""

    lines: int
    credits: int
    balance: QuoteBalance
    affordable: bool
    limited_by: Literal["balance", "key_spend_limit"] | None
    key_limit: KeyLimit | None


class BatchRequestLine(ApiModel):
    """One line of a batch: its ``custom_id`` (unique in the batch) and a generation's body (extra
    fields are the model's)."""

    custom_id: str
    model: str


class BatchResultLine(ApiModel):
    """One line of GET /v1/batches/{id}/results (JSONL, input order): its index and custom_id, and its
    generation, or the error it ended with without one (canceled or expired first, refused)."""

    line: int
    custom_id: str
    generation: Generation | None
    error: GenerationError | None


BatchEventType = Literal[
    "batch.created", "batch.progress", "batch.completed", "batch.canceled", "batch.expired"
]


class BatchEvent(ApiModel):
    """A batch's event in the account's stream: ``batch.created``, ``batch.progress`` (at most one a
    second), then one of ``batch.completed``, ``batch.canceled``, ``batch.expired``; ``data`` is the
    batch as it was then."""

    id: int
    type: BatchEventType
    created_at: datetime
    data: Batch


class BatchEventList(ApiModel):
    """A batch's own events so far (GET /v1/batches/{id}/events as JSON), oldest first."""

    data: list[BatchEvent]


class BatchWebhookSubscription(ApiModel):
    """POST /v1/batches ``webhook``: where the batch's own events are delivered, signed as a
    generation's webhook (``events``: the types delivered; default the batch's end)."""

    url: str
    events: list[BatchEventType] | None = None


AccountEvent.model_rebuild()
AccountEventList.model_rebuild()

OPENAPI_COMPONENTS: dict[str, type[ApiModel]] = {
    "Error": ErrorBody,
    "ValidationError": ValidationErrorBody,
    "Generation": Generation,
    "GenerationList": GenerationList,
    "CreditBalance": CreditBalance,
    "ModelList": ModelList,
    "Quote": Quote,
    "NotCancelable": NotCancelableBody,
    "GenerationEvent": GenerationEvent,
    "GenerationEventList": GenerationEventList,
    "AccountEvent": AccountEvent,
    "AccountEventList": AccountEventList,
    "WebhookSecret": WebhookSecret,
    "WebhookSubscription": WebhookSubscription,
    "Batch": Batch,
    "BatchList": BatchList,
    "BatchQuote": BatchQuote,
    "BatchRequestLine": BatchRequestLine,
    "BatchEvent": BatchEvent,
    "BatchEventList": BatchEventList,
    "BatchWebhookSubscription": BatchWebhookSubscription,
    "ApiKey": ApiKey,
    "KeyEvent": KeyEvent,
}

"""The official Python client of the Generation API.

from generation_client import Client

client = Client()  # GENERATION_API_KEY, GENERATION_BASE_URL
generation = client.generations.run(model="lumen-pro", prompt="a lighthouse at dusk")
for file in client.download(generation, "out"):
    print(file.path, file.size)
"""

from ._catalog import AsyncCredits, AsyncModels, Credits, Models, price_of
from ._client import DEFAULT_BASE_URL, AsyncClient, Client
from ._download import SavedFile
from ._generations import AsyncGenerations, Generations
from ._pager import AsyncGenerationPager, AsyncPage, GenerationPager, Page
from ._version import __version__
from .errors import (
    ApiAccessDisabledError,
    ApiError,
    AuthenticationError,
    BadRequestError,
    ConcurrencyLimitError,
    ConflictError,
    ConnectionError,
    DownloadError,
    GenerationClientError,
    GenerationEndedError,
    GenerationFailedError,
    GenerationRejectedError,
    IdempotencyConflictError,
    InsufficientCreditsError,
    InternalServerError,
    InvalidRequestError,
    MissingApiKeyError,
    NotCancelableError,
    NotFoundError,
    PayloadTooLargeError,
    PaymentRequiredError,
    PermissionDeniedError,
    RateLimitError,
    RequestTimeoutError,
    RouteNotAvailableError,
    ServiceUnavailableError,
    UnsupportedMediaTypeError,
    WaitTimeoutError,
)
from .retry_policy import RETRYABLE_STATUSES, RetryEvent, backoff, parse_retry_after
from .types import (
    CreditBalance,
    Generation,
    GenerationEvent,
    GenerationEventList,
    GenerationList,
    GenerationRequest,
    GenerationStatus,
    KeyedGeneration,
    Model,
    Quote,
    WebhookSecret,
    WebhookSubscription,
)

__all__ = [
    "DEFAULT_BASE_URL",
    "RETRYABLE_STATUSES",
    "ApiAccessDisabledError",
    "ApiError",
    "AsyncClient",
    "AsyncCredits",
    "AsyncGenerationPager",
    "AsyncGenerations",
    "AsyncModels",
    "AsyncPage",
    "AuthenticationError",
    "BadRequestError",
    "Client",
    "ConcurrencyLimitError",
    "ConflictError",
    "ConnectionError",
    "CreditBalance",
    "Credits",
    "DownloadError",
    "Generation",
    "GenerationClientError",
    "GenerationEndedError",
    "GenerationEvent",
    "GenerationEventList",
    "GenerationFailedError",
    "GenerationList",
    "GenerationPager",
    "GenerationRejectedError",
    "GenerationRequest",
    "GenerationStatus",
    "Generations",
    "IdempotencyConflictError",
    "InsufficientCreditsError",
    "InternalServerError",
    "InvalidRequestError",
    "KeyedGeneration",
    "MissingApiKeyError",
    "Model",
    "Models",
    "NotCancelableError",
    "NotFoundError",
    "Page",
    "PayloadTooLargeError",
    "PaymentRequiredError",
    "PermissionDeniedError",
    "Quote",
    "RateLimitError",
    "RequestTimeoutError",
    "RetryEvent",
    "RouteNotAvailableError",
    "SavedFile",
    "ServiceUnavailableError",
    "UnsupportedMediaTypeError",
    "WaitTimeoutError",
    "WebhookSecret",
    "WebhookSubscription",
    "__version__",
    "backoff",
    "parse_retry_after",
    "price_of",
]

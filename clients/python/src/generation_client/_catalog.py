"""client.models and client.credits (sync and async), and prices worked out from the live catalog."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._core import Request
from ._http import AsyncHttp, SyncHttp
from ._steps import Steps, fetch
from .errors import NotFoundError
from .types import ApiKey, CreditBalance, Model, ModelList

_MODELS = Request("GET", "/models")
_CREDITS = Request("GET", "/credits")
_KEY = Request("GET", "/key")


def _models() -> Steps[list[Model]]:
    return (yield from fetch(_MODELS, ModelList.model_validate)).data


def _model(model_id: str) -> Steps[Model]:
    for model in (yield from _models()):
        if model.id == model_id:
            return model
    raise NotFoundError(status=404, code="model_not_found", message=f"No model {model_id} in the catalog.")


class Models:
    """The live catalog: each model's options, allowed values, defaults and prices."""

    def __init__(self, http: SyncHttp) -> None:
        self._http = http

    def list(self) -> list[Model]:
        return self._http.run(_models())

    def get(self, model_id: str) -> Model:
        """One model by id (from the catalog: the API has no per-model route). NotFoundError when unknown."""
        return self._http.run(_model(model_id))


class AsyncModels:
    def __init__(self, http: AsyncHttp) -> None:
        self._http = http

    async def list(self) -> list[Model]:
        return await self._http.run(_models())

    async def get(self, model_id: str) -> Model:
        return await self._http.run(_model(model_id))


class Credits:
    """The balance the API draws from."""

    def __init__(self, http: SyncHttp) -> None:
        self._http = http

    def get(self) -> CreditBalance:
        return self._http.run(fetch(_CREDITS, CreditBalance.model_validate))


class AsyncCredits:
    def __init__(self, http: AsyncHttp) -> None:
        self._http = http

    async def get(self) -> CreditBalance:
        return await self._http.run(fetch(_CREDITS, CreditBalance.model_validate))


class Key:
    """The key (or connected app) the client calls with: its rules and its spend (GET /v1/key)."""

    def __init__(self, http: SyncHttp) -> None:
        self._http = http

    def get(self) -> ApiKey:
        """Its access, models, spend limit, what is left of it and when it resets, and what it spent."""
        return self._http.run(fetch(_KEY, ApiKey.model_validate))


class AsyncKey:
    def __init__(self, http: AsyncHttp) -> None:
        self._http = http

    async def get(self) -> ApiKey:
        return await self._http.run(fetch(_KEY, ApiKey.model_validate))


def price_of(model: Model, body: Mapping[str, Any]) -> int | None:
    """The credits a body would cost, as the API quotes it: (credits[value of ``by``, or "*"] + each
    matching surcharge) x duration for per-second models. Omitted options take the model's defaults.
    None when the catalog has no price for the choice."""

    def value(name: str) -> Any:
        if body.get(name) is not None:
            return body[name]
        option = model.options.get(name)
        return option.default if option else None

    pricing = model.pricing
    base = pricing.credits.get("*" if pricing.by is None else str(value(pricing.by)))
    if base is None:
        return None
    per_unit = base + sum(by_value.get(str(value(o)), 0) for o, by_value in pricing.surcharges.items())
    if pricing.unit != "second":
        return per_unit
    seconds = value("duration")
    return per_unit * seconds if isinstance(seconds, int) else None

"""Model prices for the native transport, from data: configured prices, else LiteLLM's price map.

LiteLLM ships its model price map as a JSON file inside the package, read without importing
LiteLLM, once (council.config.model_map). An entry is found as LiteLLM finds it:
``provider/model``, else ``model`` if the map files it under that provider.

A price is the entry's per-token input and output rates; cached prompt tokens (reported in
``usage.prompt_tokens_details.cached_tokens``) are billed at ``cache_read_input_token_cost``
(the input rate when there is none); past a prompt-size threshold
(``input_cost_per_token_above_200k_tokens``…) the threshold's rates apply to every token.
Entries priced another way (per second, per character, tiered lists) have no per-token price
here: their cost is None, as is an unknown model's. Never a guess.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

from council._util import speedups
from council.config import model_map
from council.config.model_map import price_map

_THRESHOLD = re.compile(r"^input_cost_per_token_above_(\d+)(k?)_tokens$")
_UNPRICED = ("tiered_pricing", "input_cost_per_second", "input_cost_per_character", "output_cost_per_second")

_loader: threading.Thread | None = None


def load_in_background() -> None:
    """Start reading the map in a thread, once: called as a model's first request goes out, so
    the read overlaps the wait for its reply instead of delaying the reply's handling. It begins
    once that request is on the wire (:func:`council._util.speedups.after_grace`); a lookup
    before then reads the map itself."""
    global _loader
    if not model_map.is_loaded() and _loader is None:
        _loader = threading.Thread(target=speedups.after_grace(price_map), name="council-price-map", daemon=True)
        _loader.start()


def model_entry(provider: str, model: str) -> dict[str, Any] | None:
    """The map's entry for ``model`` at ``provider`` (``openai``, ``groq``…), or None."""
    table = price_map()
    entry = table.get(f"{provider}/{model}")
    if isinstance(entry, dict):
        return entry
    entry = table.get(model)
    if isinstance(entry, dict) and entry.get("litellm_provider") == provider:
        return entry
    return None


def supports_response_schema(provider: str, model: str) -> bool:
    entry = model_entry(provider, model)
    return bool(entry and entry.get("supports_response_schema"))


@dataclass(frozen=True)
class Rates:
    input: float
    output: float
    cache_read: float


@dataclass(frozen=True)
class Price:
    base: Rates
    tiers: tuple[tuple[int, Rates], ...] = ()
    """(prompt tokens above which, rates), lowest threshold first."""

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float:
        rates = self.base
        for threshold, tier in self.tiers:
            if prompt_tokens > threshold:
                rates = tier
        cached = min(max(cached_tokens, 0), prompt_tokens)
        return (prompt_tokens - cached) * rates.input + cached * rates.cache_read + completion_tokens * rates.output


def configured_price(input_cost_per_token: float | None, output_cost_per_token: float | None) -> Price | None:
    """``[models.X] input_cost_per_token`` / ``output_cost_per_token`` (one alone prices the other side at 0)."""
    if input_cost_per_token is None and output_cost_per_token is None:
        return None
    rate_in, rate_out = input_cost_per_token or 0.0, output_cost_per_token or 0.0
    return Price(Rates(rate_in, rate_out, rate_in))


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def mapped_price(provider: str, model: str) -> Price | None:
    """The price map's per-token price of ``model`` at ``provider``, or None when it has none."""
    entry = model_entry(provider, model)
    if entry is None or any(key in entry for key in _UNPRICED):
        return None
    rate_in, rate_out = _number(entry.get("input_cost_per_token")), _number(entry.get("output_cost_per_token"))
    if rate_in is None or rate_out is None:
        return None
    cache = _number(entry.get("cache_read_input_token_cost"))
    base = Rates(rate_in, rate_out, rate_in if cache is None else cache)
    tiers = []
    for key in entry:
        match = _THRESHOLD.match(key)
        if match is None:
            continue
        threshold = int(match.group(1)) * (1000 if match.group(2) else 1)
        suffix = key.removeprefix("input_cost_per_token")
        tier_in = _number(entry[key])
        tier_out = _number(entry.get("output_cost_per_token" + suffix))
        tier_cache = _number(entry.get("cache_read_input_token_cost" + suffix))
        if tier_in is None:
            continue
        tiers.append(
            (
                threshold,
                Rates(
                    tier_in,
                    base.output if tier_out is None else tier_out,
                    tier_in if tier_cache is None else tier_cache,
                ),
            )
        )
    return Price(base, tuple(sorted(tiers, key=lambda t: t[0])))


def worst_rates(price: Price) -> tuple[float, float]:
    """The highest input and output rates of any tier: a bound whatever the prompt's size."""
    tiers = [price.base, *(rates for _, rates in price.tiers)]
    return max(r.input for r in tiers), max(r.output for r in tiers)


def output_limit(provider: str, model: str) -> int | None:
    """The most tokens the price map says one reply of ``model`` can hold, or None."""
    entry = model_entry(provider, model) or {}
    for key in ("max_output_tokens", "max_tokens"):
        value = entry.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def call_price(resolved: Any) -> Any:
    """A configured model's ``council.accounting.budget.CallPrice`` (``resolved``: a ``ResolvedModel``):
    configured prices, else the price map's; offline models (fake/, local/) cost nothing unless
    priced. None when the price is unknown."""
    from council.accounting.budget import CallPrice
    from council.config.endpoints import native_endpoint, provider_of

    spec = resolved.spec
    configured = configured_price(spec.input_cost_per_token, spec.output_cost_per_token)
    transport = resolved.transport
    if transport in ("fake", "local"):
        if configured is None:  # free: no bound on the output is needed
            return CallPrice(0.0, 0.0, 0)
        provider, wire, price = "", resolved.model, configured
    elif transport == "native":
        endpoint = native_endpoint(resolved.model, spec.api_base)
        provider, wire = endpoint.provider, endpoint.wire_model
        price = configured or mapped_price(provider, wire)
    else:
        provider = provider_of(resolved.model) or ""
        wire = resolved.model.removeprefix(provider + "/") if provider else resolved.model
        price = configured or mapped_price(provider, wire)
    if price is None:
        return None
    rate_in, rate_out = worst_rates(price)
    return CallPrice(rate_in, rate_out, output_limit(provider, wire) if provider else None)

"""The TOML config file, as pydantic models (SPEC "Config file — the contract")."""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from council.config.deliberation import MAX_ROUNDS, DeliberationMode
from council.config.endpoints import transport_of, unservable
from council.methods.ranking import CONSENSUS_METHODS, DEFAULT_CONSENSUS

SelfReview = Literal["include", "exclude", "flag"]


class _Strict(BaseModel):
    # Unknown keys are typos more often than not: reject them with the key's name. TOML has
    # inf and nan; no setting means them (`timeout = inf` would never time out).
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


#: Scale ends further out than this are refused: scores are stored as 64-bit integers and
#: summed, so ends near 2^63 would overflow after the calls were paid for.
MAX_SCALE_END = 1_000_000


class ModelSpec(_Strict):
    """``[models.ALIAS]``: how to reach one model."""

    model: str = Field(min_length=1, description="any LiteLLM model string, fake/NAME or local/NAME")
    api_base: str | None = None
    transport: Literal["native", "litellm"] | None = Field(
        default=None,
        description="native: our OpenAI-compatible client; litellm: through LiteLLM (default: see config.endpoints)",
    )
    api_key_env: str | None = None
    max_concurrency: int = Field(default=8, ge=1)
    rpm: int | None = Field(default=None, ge=1)
    tpm: int | None = Field(default=None, ge=1, description="tokens a minute (prompt + reply), shared like rpm")
    timeout: float = Field(default=120.0, gt=0, description="seconds per call attempt")
    retries: int = Field(default=3, ge=0, le=10, description="retries on 429/5xx/timeouts, with backoff and jitter")
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    input_cost_per_token: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    output_cost_per_token: float | None = Field(default=None, ge=0, allow_inf_nan=False)

    @field_validator("api_base")
    @classmethod
    def _api_base_is_an_http_url(cls, v: str | None) -> str | None:
        if v is not None:
            parts = urlsplit(v)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                shown = v.split("://")[-1].rpartition("@")[2]  # never a password it may carry
                raise ValueError(f"{shown!r} is not an http:// or https:// URL (e.g. http://{shown})")
        return v

    @model_validator(mode="after")
    def _one_credential(self) -> ModelSpec:
        # The URL's user and password go as Basic auth, on the native transport: with a key too,
        # the HTTP clients refuse to send both (or one silently replaces the other), and
        # LiteLLM's client, which always sends a key, fails every call.
        if self.api_base is None or "@" not in urlsplit(self.api_base).netloc:
            return self
        if self.api_key_env:
            raise ValueError("api_base carries credentials and api_key_env is also set: use one")
        if self.transport == "litellm":
            raise ValueError('api_base carries credentials, which transport = "litellm" cannot send: use native')
        return self

    @model_validator(mode="after")
    def _tpm_needs_max_tokens(self) -> ModelSpec:
        # A call's tokens are reserved before it is sent: its reply's share must be bounded.
        if self.tpm is not None and self.max_tokens is None:
            raise ValueError("tpm needs max_tokens (the most tokens a reply may take), to reserve each call's tokens")
        if self.tpm is not None and self.max_tokens is not None and self.max_tokens >= self.tpm:
            raise ValueError(f"max_tokens ({self.max_tokens}) must be below tpm ({self.tpm}): no call could fit in it")
        return self

    @model_validator(mode="after")
    def _transport_can_reach_it(self) -> ModelSpec:
        transport_of(self.model, self.api_base, self.transport)  # ValueError: this model cannot go native
        problem = unservable(self.model, self.api_base)
        if problem is not None:  # refused now, not as a provider error at the first call
            raise ValueError(problem)
        return self


class CouncilSpec(_Strict):
    """``[councils.NAME]``."""

    members: list[str] = Field(min_length=1)
    reviewers: list[str] | None = None
    chairman: str | None = None
    fallback_chairman: str | None = None
    scale: tuple[int, int] = (1, 10)
    self_review: SelfReview = "exclude"
    quorum: int | None = Field(
        default=None, ge=1, description="min members that must answer (default: half, rounded up)"
    )
    review_quorum: int = Field(default=1, ge=1, description="min valid reviews to build a consensus")
    consensus: str = Field(
        default=DEFAULT_CONSENSUS, description=f"how the rankings become one order: {' | '.join(CONSENSUS_METHODS)}"
    )
    max_review_attempts: int = Field(default=3, ge=1, le=10, description="1 request + re-requests for invalid output")
    max_answer_chars: int = Field(default=20_000, ge=100, description="longer answers are truncated, with notice")
    session_timeout: float | None = Field(default=None, gt=0, description="seconds for the whole session")
    deliberation: DeliberationMode = Field(default="off", description="a second round: off | auto | always")
    deliberation_threshold: float = Field(
        default=0.5, ge=0, le=1, strict=True, description="auto: a round when Kendall's W < this"
    )
    deliberation_margin: float | None = Field(
        default=None,
        ge=0,
        le=1,
        strict=True,
        description="auto: also a round when the top two are within this (Borda points)",
    )
    max_rounds: int = Field(default=1, ge=1, le=MAX_ROUNDS, strict=True, description="deliberation rounds at most")
    synthesis: Literal["structured", "plain"] = Field(
        default="structured",
        description="the chairman's reply: structured (the answer, then where the council disagreed) or plain prose",
    )
    stage_grace: Literal["auto", "off"] | float = Field(
        default="auto",
        description='once a stage has its quorum, how long it waits for the rest: "auto", "off" or seconds '
        "(council.session.grace)",
    )

    @field_validator("stage_grace", mode="before")
    @classmethod
    def _grace_is_seconds(cls, v: object) -> object:
        if isinstance(v, bool) or (isinstance(v, int | float) and not 0 <= v < float("inf")):
            raise ValueError(f'stage_grace must be "auto", "off" or a number of seconds >= 0, got {v!r}')
        return v

    @field_validator("scale")
    @classmethod
    def _scale_is_a_range(cls, v: tuple[int, int]) -> tuple[int, int]:
        lo, hi = v
        if lo >= hi:
            raise ValueError(f"scale must be [low, high] with low < high, got [{lo}, {hi}]")
        if max(abs(lo), abs(hi)) > MAX_SCALE_END:
            raise ValueError(f"scale [{lo}, {hi}] is out of range (ends from -{MAX_SCALE_END} to {MAX_SCALE_END})")
        if hi - lo > 100:
            raise ValueError(f"scale [{lo}, {hi}] is too wide (at most 100 steps)")
        return v

    @field_validator("consensus")
    @classmethod
    def _known_consensus(cls, v: str) -> str:
        if v not in CONSENSUS_METHODS:
            raise ValueError(f"unknown consensus method {v!r}; choose one of: {', '.join(CONSENSUS_METHODS)}")
        return v

    @field_validator("members", "reviewers")
    @classmethod
    def _distinct(cls, v: list[str] | None) -> list[str] | None:
        if v is not None:
            dupes = sorted({m for m in v if v.count(m) > 1})
            if dupes:
                raise ValueError(f"listed twice: {', '.join(dupes)}")
        return v


class Defaults(_Strict):
    council: str = "default"


class Privacy(_Strict):
    hash_queries: bool = False
    store_transcripts: bool = True


class Storage(_Strict):
    """``[storage]``: where the data lives (``COUNCIL_DATABASE_URL`` wins; council.storage.location)."""

    url: str | None = None


class BudgetSpec(_Strict):
    """``[budget]``: a hard spend cap wherever the file is used: run, compare, grade, batch, worker,
    and each session of the server, the MCP tools and the Python API (``--max-cost`` wins;
    ``council.accounting.budget.cap_in_force``)."""

    max_cost_usd: float | None = Field(default=None, gt=0, allow_inf_nan=False)


class CacheSpec(_Strict):
    """``[cache]``: answer identical requests from the store (``--cache``)."""

    enabled: bool = False


class ConfigFile(_Strict):
    """The whole file."""

    defaults: Defaults = Defaults()
    councils: dict[str, CouncilSpec] = Field(default_factory=dict)
    models: dict[str, ModelSpec] = Field(default_factory=dict)
    privacy: Privacy = Privacy()
    storage: Storage = Storage()
    budget: BudgetSpec = BudgetSpec()
    cache: CacheSpec = CacheSpec()

    @model_validator(mode="after")
    def _default_council_exists(self) -> ConfigFile:
        if self.councils and self.defaults.council not in self.councils:
            raise ValueError(
                f"defaults.council = {self.defaults.council!r} but there is no [councils.{self.defaults.council}]"
            )
        return self

"""Find, read, validate and resolve the configuration.

Precedence, lowest first: the file (``--config``, else ``$COUNCIL_CONFIG``, else
``$COUNCIL_HOME/council.toml``, else the embedded offline default), then the
environment (``COUNCIL_HASH_QUERIES``, ``COUNCIL_STORE_TRANSCRIPTS``), then CLI flags
(``--council``, ``--seed``), which callers pass to :func:`resolve_council`.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError

from council._util.home import council_home
from council.config.deliberation import DeliberationSettings
from council.config.endpoints import Transport, bare_model_fix, default_api_key, transport_of
from council.config.schema import ConfigFile, CouncilSpec, ModelSpec, SelfReview
from council.errors import ConfigError, InputError, NotFoundError
from council.untrusted.inputs import parse_toml, read_text_file
from council.untrusted.redaction import register_secret, register_url_credentials

# The embedded offline default: two different small local models (llama.cpp),
# so a fresh install can run a real multi-model council with no keys and no network.
OFFLINE_DEFAULT: dict[str, Any] = {
    "defaults": {"council": "default"},
    "councils": {
        "default": {
            "members": ["smollm2", "gemma3"],
            "chairman": "smollm2",
            "fallback_chairman": "gemma3",
            "scale": [1, 10],
            # With two members, excluding self-review would leave each reviewer one answer to rank.
            "self_review": "flag",
        }
    },
    "models": {
        "smollm2": {"model": "local/smollm2", "max_concurrency": 1, "timeout": 600, "max_tokens": 200},
        "gemma3": {"model": "local/gemma3", "max_concurrency": 1, "timeout": 600, "max_tokens": 200},
    },
}


class LoadedConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    config: ConfigFile
    source: str
    """The file it came from, or ``"offline default"``."""
    offline_default: bool = False


class ResolvedModel(BaseModel):
    """A member, reviewer or chairman, ready to call."""

    model_config = ConfigDict(frozen=True)

    id: str
    """The alias from [models], or the model string when used directly."""
    spec: ModelSpec
    api_key: SecretStr | None = None

    @property
    def model(self) -> str:
        return self.spec.model

    @property
    def transport(self) -> Transport:
        """Which backend serves it: fake, local, native (OpenAI-compatible HTTP) or litellm."""
        return transport_of(self.spec.model, self.spec.api_base, self.spec.transport)


class PrivacySettings(BaseModel):
    """What may be kept: resolved once (file, then environment) and handed to every pipeline."""

    model_config = ConfigDict(frozen=True)

    store_transcripts: bool = True
    """Store question, answer, review and judge text (``COUNCIL_STORE_TRANSCRIPTS``)."""
    hash_queries: bool = False
    """Bias records carry a salted HMAC of the query (``COUNCIL_HASH_QUERIES``)."""


class ResolvedCouncil(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    members: list[ResolvedModel]
    reviewers: list[ResolvedModel]
    chairman: ResolvedModel | None
    fallback_chairman: ResolvedModel | None
    scale: tuple[int, int]
    self_review: SelfReview
    quorum: int
    review_quorum: int
    consensus: str
    max_review_attempts: int
    max_answer_chars: int
    session_timeout: float | None
    synthesis: Literal["structured", "plain"] = "structured"
    privacy: PrivacySettings
    deliberation: DeliberationSettings = DeliberationSettings()
    stage_grace: str | float = "auto"
    """Once a stage has its quorum, how long it waits for the rest (council.session.grace)."""
    offline_default: bool
    source: str

    @property
    def models(self) -> list[ResolvedModel]:
        """Every model the council calls: members, reviewers, the chairman and its fallback."""
        return [*self.members, *self.reviewers, *(x for x in (self.chairman, self.fallback_chairman) if x)]

    @property
    def hash_queries(self) -> bool:
        return self.privacy.hash_queries

    @property
    def store_transcripts(self) -> bool:
        return self.privacy.store_transcripts


def format_validation_error(exc: ValidationError, where: str) -> str:
    """One line: the first problem with its dotted location, and how many more."""
    errors = exc.errors()
    first = errors[0]
    loc = ".".join(str(p) for p in first["loc"] if not str(p).startswith("function-after"))
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        msg = "unknown key"
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    if first["type"] == "extra_forbidden" and first["loc"][-1] == "api_key":
        # Said without "api_key:", which error-text redaction would read as a credential.
        hint = "keys never go in the config file; name the environment variable that holds it with api_key_env"
        return f"{where}: {loc} is not a setting: {hint}{more}"
    return f"{where}: {loc}: {msg}{more}" if loc else f"{where}: {msg}{more}"


def parse_config(data: Mapping[str, Any], where: str) -> ConfigFile:
    try:
        return ConfigFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, where)) from None


def read_config_file(path: Path) -> ConfigFile:
    try:
        data = parse_toml(read_text_file(path, "config file"), str(path))
    except InputError as exc:
        raise ConfigError(str(exc)) from None
    return parse_config(data, str(path))


def load_config(
    path: str | Path | dict[str, Any] | None = None, env: Mapping[str, str] | None = None
) -> LoadedConfig:
    """Load the config from a path or dict, else from the environment's usual places."""
    env = os.environ if env is None else env
    if isinstance(path, dict):
        return LoadedConfig(config=parse_config(path, "config"), source="config dict")
    if path is None and env.get("COUNCIL_CONFIG"):
        path = env["COUNCIL_CONFIG"]
    if path is None:
        candidate = council_home(env) / "council.toml"
        if candidate.is_file():
            path = candidate
    if path is None:
        return LoadedConfig(
            config=parse_config(OFFLINE_DEFAULT, "offline default"),
            source="offline default",
            offline_default=True,
        )
    path = Path(path).expanduser()
    return LoadedConfig(config=read_config_file(path), source=str(path))


def _env_flag(env: Mapping[str, str], name: str) -> bool | None:
    value = env.get(name)
    if value is None or value == "":
        return None
    if value.lower() in {"1", "true", "yes", "on"}:
        return True
    if value.lower() in {"0", "false", "no", "off"}:
        return False
    raise ConfigError(f"{name} must be 1 or 0, got {value!r}")


def resolve_privacy(
    config: ConfigFile | LoadedConfig | None = None, env: Mapping[str, str] | None = None
) -> PrivacySettings:
    """The privacy settings: the environment over the file over the defaults.

    ``config=None`` reads the config the CLI would (``$COUNCIL_CONFIG``, else
    ``$COUNCIL_HOME/council.toml``), so library callers and the CLI agree.
    """
    env = os.environ if env is None else env
    if config is None:
        config = load_config(None, env)
    file = (config.config if isinstance(config, LoadedConfig) else config).privacy
    transcripts = _env_flag(env, "COUNCIL_STORE_TRANSCRIPTS")
    hashing = _env_flag(env, "COUNCIL_HASH_QUERIES")
    return PrivacySettings(
        store_transcripts=file.store_transcripts if transcripts is None else transcripts,
        hash_queries=file.hash_queries if hashing is None else hashing,
    )


def model_spec(data: Mapping[str, Any], where: str) -> ModelSpec:
    """A model string used directly, or a stored ``[models.X]`` table: checked as the file's are."""
    try:
        return ModelSpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, where)) from None


def resolve_model(ref: str, config: ConfigFile, env: Mapping[str, str], where: str) -> ResolvedModel:
    """An alias from [models], or a provider/model string used directly."""
    spec = config.models.get(ref)
    if spec is None:
        if "/" not in ref:
            known = ", ".join(sorted(config.models)) or "none defined"
            fix = bare_model_fix(ref)
            hint = f": did you mean {fix!r}?" if fix else ""
            raise ConfigError(
                f"{where}: unknown model alias {ref!r} (aliases: {known}; or use a provider/model string){hint}"
            )
        spec = model_spec({"model": ref}, where)
    register_url_credentials(spec.api_base)  # sent as Basic auth: redacted as a key is
    api_key = None
    if spec.api_key_env:
        value = env.get(spec.api_key_env)
        if not value:
            raise ConfigError(
                f"{where}: model {ref!r} needs the environment variable {spec.api_key_env}, which is not set"
            )
        api_key = SecretStr(_one_line_key(value, spec.api_key_env, ref, where))
        register_secret(value)  # from now on redacted by value wherever it might appear
    elif transport_of(spec.model, spec.api_base, spec.transport) == "native":
        # LiteLLM reads a provider's usual key variable itself; the native client gets it here.
        value = default_api_key(spec.model, spec.api_base, env)
        api_key = SecretStr(_one_line_key(value, "its key variable", ref, where)) if value else None
        if value:
            register_secret(value)
    return ResolvedModel(id=ref, spec=spec, api_key=api_key)


def _one_line_key(value: str, name: str, ref: str, where: str) -> str:
    """A key as it goes in a header: a line break or another control character in it (a key file
    read with its newline) would fail the call, or inject a header; refused before any call,
    without the key's text."""
    if any(unicodedata.category(ch) == "Cc" for ch in value):
        raise ConfigError(
            f"{where}: the key of model {ref!r} in {name} holds a control character (a line break?): "
            "a key is one line of printable characters"
        )
    return value


def resolve_council(
    loaded: LoadedConfig,
    name: str | None = None,
    env: Mapping[str, str] | None = None,
) -> ResolvedCouncil:
    """Pick a council (flag > [defaults]) and resolve its members, keys and settings."""
    env = os.environ if env is None else env
    config = loaded.config
    name = name or config.defaults.council
    spec: CouncilSpec | None = config.councils.get(name)
    if spec is None:
        known = ", ".join(sorted(config.councils)) or "none"
        raise NotFoundError(f"unknown council {name!r} in {loaded.source} (councils: {known})")
    where = f"{loaded.source}: councils.{name}"

    def resolve(refs: list[str], field: str) -> list[ResolvedModel]:
        return [resolve_model(r, config, env, f"{where}.{field}") for r in refs]

    members = resolve(spec.members, "members")
    reviewers = resolve(spec.reviewers, "reviewers") if spec.reviewers is not None else members
    if not reviewers:
        raise ConfigError(f"{where}.reviewers: at least one reviewer is needed")
    _check_distinct_models(members, f"{where}.members")
    _check_distinct_models(reviewers, f"{where}.reviewers")
    chairman_ref = spec.chairman or spec.members[0]
    chairman = resolve_model(chairman_ref, config, env, f"{where}.chairman")
    fallback = (
        resolve_model(spec.fallback_chairman, config, env, f"{where}.fallback_chairman")
        if spec.fallback_chairman
        else None
    )
    quorum = spec.quorum if spec.quorum is not None else max(1, (len(members) + 1) // 2)
    if quorum > len(members):
        raise ConfigError(f"{where}.quorum: {quorum} is more than the {len(members)} members")

    return ResolvedCouncil(
        name=name,
        members=members,
        reviewers=reviewers,
        chairman=chairman,
        fallback_chairman=fallback,
        scale=spec.scale,
        self_review=spec.self_review,
        quorum=quorum,
        review_quorum=spec.review_quorum,
        consensus=spec.consensus,
        max_review_attempts=spec.max_review_attempts,
        max_answer_chars=spec.max_answer_chars,
        session_timeout=spec.session_timeout,
        synthesis=spec.synthesis,
        stage_grace=spec.stage_grace,
        privacy=resolve_privacy(config, env),
        deliberation=DeliberationSettings(
            mode=spec.deliberation,
            threshold=spec.deliberation_threshold,
            margin=spec.deliberation_margin,
            max_rounds=spec.max_rounds,
        ),
        offline_default=loaded.offline_default,
        source=loaded.source,
    )


def _check_distinct_models(models: list[ResolvedModel], where: str) -> None:
    # Bias records identify reviewers and answers by model string, so one council
    # cannot hold the same model twice without its records becoming ambiguous.
    seen: dict[str, str] = {}
    for m in models:
        if m.model in seen:
            raise ConfigError(f"{where}: {seen[m.model]!r} and {m.id!r} are the same model {m.model!r}")
        seen[m.model] = m.id

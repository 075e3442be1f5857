"""Configuration: the TOML contract, the offline default, and resolution."""

from council.config.loader import (
    OFFLINE_DEFAULT,
    LoadedConfig,
    PrivacySettings,
    ResolvedCouncil,
    ResolvedModel,
    load_config,
    resolve_council,
    resolve_model,
    resolve_privacy,
)
from council.config.schema import ConfigFile, CouncilSpec, ModelSpec

__all__ = [
    "OFFLINE_DEFAULT",
    "ConfigFile",
    "CouncilSpec",
    "LoadedConfig",
    "PrivacySettings",
    "ModelSpec",
    "ResolvedCouncil",
    "ResolvedModel",
    "load_config",
    "resolve_council",
    "resolve_model",
    "resolve_privacy",
]

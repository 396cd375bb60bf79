"""One way for every service to read its settings: defaults defined once, environment, then flags.

A service declares its settings as a subclass of ``ServiceSettings`` with its own ``env_prefix``
(``SUANLI_METERING_``, ...); each field's default is written once, there. ``load`` reads the
environment and applies the flags a command line was given (``None`` means "not given"), so a CLI
option never repeats a default. Platform-wide variables (broker, database, topic prefix, metrics
port) keep their shared names through ``shared()``. A bad value becomes ``SettingsError`` naming
the variable, which a CLI shows as a usage error.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, Self, TypeVar

from pydantic import AliasChoices, Field, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

__all__ = [
    "ServiceSettings",
    "SettingsConfigDict",
    "SettingsError",
    "load_or_usage_error",
    "option",
    "shared",
]

KAFKA_BOOTSTRAP_ENV = "SUANLI_KAFKA_BOOTSTRAP"
PG_DSN_ENV = "SUANLI_PG_DSN"
TOPIC_PREFIX_ENV = "SUANLI_TOPIC_PREFIX"
METRICS_PORT_ENV = "SUANLI_METRICS_PORT"


# Set while ``load`` builds settings from an explicit mapping, so the process environment stays out.
_MAPPING_ONLY: ContextVar[bool] = ContextVar("suanli_settings_mapping_only", default=False)


class SettingsError(ValueError):
    """A setting is missing or invalid; the message names the environment variable or flag."""


def shared(env: str, default: Any = ..., *, own: str | None = None, **field: Any) -> Any:
    """A field read from a platform-wide variable (``SUANLI_KAFKA_BOOTSTRAP``) whatever the prefix.

    ``own`` names a variable of this service alone that wins over the shared one when both are set
    (``SUANLI_SCHEDULING_PG_DSN``: each service connects as its own database role).
    """
    names = (env,) if own is None else (own, env)
    return Field(
        default, validation_alias=AliasChoices(*(n for name in names for n in (name, name.lower()))), **field
    )


SettingsT = TypeVar("SettingsT", bound="ServiceSettings")


class ServiceSettings(BaseSettings):
    """Base of every service's settings: frozen, unknown variables ignored, empty values unset.

    A subclass sets only what differs: ``model_config = SettingsConfigDict(env_prefix="SUANLI_X_")``
    (pydantic merges it with this base's configuration).
    """

    model_config = SettingsConfigDict(
        env_prefix="SUANLI_",
        frozen=True,
        extra="ignore",
        populate_by_name=True,
        case_sensitive=False,
        env_ignore_empty=True,
    )

    @classmethod
    def load(cls, env: Mapping[str, str] | None = None, /, **flags: Any) -> Self:
        """Settings from ``env`` (default: the process environment) with the given flags winning.

        Flags whose value is ``None`` were not given and leave the environment or default in place.
        """
        given = {name: value for name, value in flags.items() if value is not None}
        unknown = sorted(set(given) - set(cls.model_fields))
        if unknown:
            raise TypeError(f"{cls.__name__} has no setting {', '.join(unknown)}")
        try:
            if env is None:
                return cls(**given)
            token = _MAPPING_ONLY.set(True)
            try:
                return cls(**{**_from_mapping(cls, env), **given})
            finally:
                _MAPPING_ONLY.reset(token)
        except ValidationError as exc:
            raise SettingsError(_describe(cls, exc)) from None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Flags, then the environment; with an explicit mapping, that mapping alone (no .env files)."""
        if _MAPPING_ONLY.get():
            return (init_settings,)
        return (init_settings, env_settings)

    @classmethod
    def describe(cls, field: str) -> str:
        """A field's description followed by where it comes from: ``... (env X; default: Y)``."""
        info = cls.model_fields[field]
        return f"{info.description} (env {cls.env_name(field)}; {cls.default_text(field)})"

    @classmethod
    def default_text(cls, field: str) -> str:
        """The default as a person reads it: ``default: 0.5``, ``required``, ``default: none``.

        A field computed at start says so through ``json_schema_extra={"shown_default": "..."}``.
        """
        info = cls.model_fields[field]
        if info.is_required():
            return "required"
        extra = info.json_schema_extra
        if isinstance(extra, dict) and "shown_default" in extra:
            return f"default: {extra['shown_default']}"
        default: Any = info.get_default(call_default_factory=True)
        if default is None or default in ((), [], {}):
            return "default: none"
        return 'default: ""' if default == "" else f"default: {default}"

    @classmethod
    def env_name(cls, field: str) -> str:
        """The environment variable that sets ``field`` (the first of `env_names`)."""
        return cls.env_names(field)[0]

    @classmethod
    def env_names(cls, field: str) -> tuple[str, ...]:
        """The environment variables that set ``field``, the one that wins first."""
        alias = cls.model_fields[field].validation_alias
        if isinstance(alias, AliasChoices):
            # A choice spelling the field's own name lets code pass it by name; it is no variable.
            names = (str(choice).upper() for choice in alias.choices if choice != field)
            return tuple(dict.fromkeys(names))
        prefix = str(cls.model_config.get("env_prefix", ""))
        return (f"{prefix}{field}".upper(),)


def option(settings: type[ServiceSettings], field: str, *flags: str, **extra: Any) -> Any:
    """The typer option that sets ``field``: not given is None, its help names the variable and default.

    So a command line never repeats a default: the settings class holds it, ``load`` applies it.
    """
    import typer

    return typer.Option(None, *flags, help=settings.describe(field), show_default=False, **extra)


def load_or_usage_error(settings: type[SettingsT], **flags: Any) -> SettingsT:
    """``settings.load(**flags)`` for a command line: a bad setting is a usage error (exit 2)."""
    import typer

    try:
        return settings.load(**flags)
    except SettingsError as exc:
        raise typer.BadParameter(str(exc)) from exc


def _from_mapping(cls: type[ServiceSettings], env: Mapping[str, str]) -> dict[str, Any]:
    """The fields an explicit mapping sets (tests and callers pass one instead of the process's)."""
    upper = {key.upper(): value for key, value in env.items() if value != ""}
    values: dict[str, Any] = {}
    for name in cls.model_fields:
        variable = next((v for v in cls.env_names(name) if v in upper), None)
        if variable is not None:
            values[name] = upper[variable]
    return values


def _describe(cls: type[ServiceSettings], exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        field = str(error["loc"][0]) if error["loc"] else ""
        # A field read through aliases is reported under its first alias, not its own name.
        owner = next((f for f in cls.model_fields if field in (f, *cls.env_names(f))), None)
        name = field if owner is None else " or ".join(cls.env_names(owner))
        if error["type"] == "missing":
            problems.append(f"{name} is not set")
        else:
            problems.append(f"{name}: {error['msg']} (got {error.get('input')!r})")
    return "; ".join(problems)

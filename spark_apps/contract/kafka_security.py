"""How the platform's Kafka clients authenticate: one typed model, translated for both client libraries.

The settings come from the extra of the Airflow Kafka connection (librdkafka's keys, as the Kafka
provider reads them: `security.protocol`, `sasl.mechanism(s)`, `sasl.username`, `sasl.password`,
`ssl.ca.location`, `ssl.endpoint.identification.algorithm`). Spark's Kafka source and sink use the
Java client, which spells the same things differently (`kafka.sasl.jaas.config` with a login
module, a PEM truststore); the app's side channels (offset commits, watermark queries) use
librdkafka. `java_options` and `librdkafka_config` are the one place that translation happens.

Secrets never travel in the app's config (registry rows, config files, the command line): the
launcher hands the model to the driver in the environment of its spark-submit process
(`KAFKA_SECURITY_ENV`, readable only by its owner), and the driver attaches it to its config
object, where it is excluded from every dump and masked in every repr.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError, model_validator

from spark_apps.contract.config_rules import validation_problems

KAFKA_SECURITY_ENV = "REVENUE_PLATFORM_KAFKA_SECURITY"
"""Environment variable of the driver process holding the security settings (JSON, secrets in clear)."""

Protocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]

# The Java client's JAAS login module for each SASL mechanism.
_LOGIN_MODULES: dict[str, str] = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
# Connection-extra keys this model understands; any other sasl.*/ssl.* key is refused, never dropped.
_UNDERSTOOD_KEYS = frozenset(
    {
        "security.protocol",
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.username",
        "sasl.password",
        "ssl.ca.location",
        "ssl.endpoint.identification.algorithm",
    }
)
SECURITY_KEY_PREFIXES = ("security.", "sasl.", "ssl.")
"""Client settings that are security settings: they come from the connection, never from app config."""


class KafkaSecurityError(ValueError):
    """The Kafka security settings are incomplete or not supported; the message names the key."""


def is_security_key(key: str) -> bool:
    """True for a client setting that belongs to the connection's security settings."""
    return key.startswith(SECURITY_KEY_PREFIXES)


class KafkaClientSecurity(BaseModel):
    """Transport security and SASL credentials of the platform's Kafka clients (PLAINTEXT by default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    protocol: Protocol = "PLAINTEXT"
    """security.protocol of every client."""
    sasl_mechanism: SaslMechanism | None = None
    """SASL mechanism; required with SASL_PLAINTEXT / SASL_SSL."""
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    """Masked in every repr and dump; only `java_options`, `librdkafka_config` and `environment` reveal it."""
    ssl_ca_location: str | None = None
    """PEM file of the CA(s) that signed the brokers' certificates (SSL / SASL_SSL); None = system trust."""
    ssl_verify_hostname: bool = True
    """Check the broker's certificate matches its host name (ssl.endpoint.identification.algorithm)."""
    bootstrap_servers: str | None = None
    """The connection's servers, which the login is for: a driver given these settings connects there
    whatever its (stored) config names (`spark_apps.contract.config.with_kafka_security`)."""

    @model_validator(mode="after")
    def _complete(self) -> KafkaClientSecurity:
        uses_sasl = self.protocol.startswith("SASL_")
        if uses_sasl and (
            self.sasl_mechanism is None or not self.sasl_username or self.sasl_password is None
        ):
            raise ValueError(
                f"security.protocol {self.protocol} needs sasl.mechanism, sasl.username and sasl.password"
            )
        if not uses_sasl and (self.sasl_mechanism or self.sasl_username or self.sasl_password):
            raise ValueError(
                f"sasl.* settings are set but security.protocol is {self.protocol}; "
                "use SASL_PLAINTEXT or SASL_SSL"
            )
        if not self.protocol.endswith("SSL") and self.ssl_ca_location:
            raise ValueError(f"ssl.ca.location is set but security.protocol is {self.protocol}")
        return self

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @classmethod
    def from_client_config(cls, client_config: Mapping[str, Any], source: str) -> KafkaClientSecurity:
        """The security settings in a librdkafka client config (an Airflow Kafka connection's extra).

        `bootstrap.servers` is kept (the login is for those servers), other settings (group.id, ...) are
        ignored; a security setting this model cannot carry to both clients is refused, naming it and
        `source`.
        """
        unsupported = sorted(k for k in client_config if is_security_key(k) and k not in _UNDERSTOOD_KEYS)
        if unsupported:
            raise KafkaSecurityError(
                f"{source}: Kafka setting(s) {unsupported} are not supported for the platform's clients "
                f"(supported: {sorted(_UNDERSTOOD_KEYS)}); client certificates, OAUTHBEARER and Kerberos "
                "are not wired through to Spark"
            )
        mechanism = client_config.get("sasl.mechanism") or client_config.get("sasl.mechanisms")
        algorithm = str(client_config.get("ssl.endpoint.identification.algorithm", "https")).lower()
        try:
            return cls(
                protocol=str(client_config.get("security.protocol", "PLAINTEXT")).upper(),  # type: ignore[arg-type]
                sasl_mechanism=str(mechanism).upper() if mechanism else None,  # type: ignore[arg-type]
                sasl_username=client_config.get("sasl.username"),
                sasl_password=client_config.get("sasl.password"),
                ssl_ca_location=client_config.get("ssl.ca.location"),
                ssl_verify_hostname=algorithm != "none",
                bootstrap_servers=client_config.get("bootstrap.servers"),
            )
        except ValidationError as error:
            problems = validation_problems(error, whole="settings")
            raise KafkaSecurityError(f"{source}: invalid Kafka security settings: {problems}") from None

    def _sasl_login(self) -> tuple[str, str, str]:
        """Mechanism, user name and password (in clear); `_complete` guarantees them under SASL."""
        if self.sasl_mechanism is None or not self.sasl_username or self.sasl_password is None:
            raise KafkaSecurityError(f"security.protocol {self.protocol} without complete sasl.* settings")
        return self.sasl_mechanism, self.sasl_username, self.sasl_password.get_secret_value()

    def java_options(self) -> dict[str, str]:
        """Options of Spark's Kafka source and sink (the Java client's keys, `kafka.`-prefixed)."""
        if self.protocol == "PLAINTEXT":
            return {}
        options: dict[str, str] = {"kafka.security.protocol": self.protocol}
        if self.uses_sasl:
            mechanism, username, password = self._sasl_login()
            options["kafka.sasl.mechanism"] = mechanism
            options["kafka.sasl.jaas.config"] = (
                f"{_LOGIN_MODULES[mechanism]} required "
                f"username={_jaas_quoted(username)} password={_jaas_quoted(password)};"
            )
        if self.protocol.endswith("SSL"):
            if self.ssl_ca_location:
                options["kafka.ssl.truststore.type"] = "PEM"
                options["kafka.ssl.truststore.location"] = self.ssl_ca_location
            if not self.ssl_verify_hostname:
                options["kafka.ssl.endpoint.identification.algorithm"] = ""
        return options

    def librdkafka_config(self) -> dict[str, str]:
        """The same settings in librdkafka's keys (confluent_kafka clients)."""
        if self.protocol == "PLAINTEXT":
            return {}
        config: dict[str, str] = {"security.protocol": self.protocol}
        if self.uses_sasl:
            mechanism, username, password = self._sasl_login()
            config["sasl.mechanisms"] = mechanism
            config["sasl.username"] = username
            config["sasl.password"] = password
        if self.protocol.endswith("SSL"):
            if self.ssl_ca_location:
                config["ssl.ca.location"] = self.ssl_ca_location
            if not self.ssl_verify_hostname:
                config["ssl.endpoint.identification.algorithm"] = "none"
        return config

    def environment(self) -> dict[str, str]:
        """The variable that hands these settings to a driver process (secrets in clear: env only)."""
        revealed = self.model_dump()
        if self.sasl_password is not None:
            revealed["sasl_password"] = self.sasl_password.get_secret_value()
        return {KAFKA_SECURITY_ENV: json.dumps(revealed)}

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> KafkaClientSecurity | None:
        """The settings a launcher put into this process's environment (None when there are none)."""
        raw = (os.environ if environ is None else environ).get(KAFKA_SECURITY_ENV)
        if not raw:
            return None
        try:
            return cls.model_validate_json(raw)
        except ValidationError as error:
            # Never echo the input: it holds the password.
            raise KafkaSecurityError(
                f"{KAFKA_SECURITY_ENV} does not hold valid Kafka security settings "
                f"({error.error_count()} problem(s) at "
                f"{[issue['loc'] for issue in error.errors(include_input=False)]})"
            ) from None


def _jaas_quoted(value: str) -> str:
    """A JAAS option value in double quotes (backslash and quote escaped)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

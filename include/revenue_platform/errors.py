"""Exception types the platform raises where a caller must tell failures apart.

Every message says what is wrong and what to do next, so that the error is the only
clue an operator needs.
"""

from __future__ import annotations


class PlatformError(Exception):
    """Base class of the platform's own errors."""


class PrerequisiteError(PlatformError):
    """Something the local stack needs is missing or unusable (Java, a port, Maven, disk)."""


class ConfigError(PlatformError):
    """Configuration is invalid; raised before anything is touched, naming the field."""


class PlatformConfigError(ConfigError):
    """The platform's own settings are invalid (an Airflow option of `[revenue_platform]`), not a person's
    request: an operator must fix it, so it alerts even in a run a person started
    (`notify.refused_request`)."""


class BrokerUnreachableError(PlatformError):
    """The Kafka bootstrap servers did not answer within the bounded retries."""


class NoLiveDeploymentYet(PlatformError):
    """A run that works on "the live deployment" found none: a fresh stack before its first deploy.

    Scheduled runs (hourly reprocessing and quality checks) skip with this message instead of
    failing on a deployment that does not exist; a run that names its deployment never sees it.
    """

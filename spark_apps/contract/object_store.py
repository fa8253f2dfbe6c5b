"""Where the lake lives when it is on an S3-compatible object store, translated for both Delta engines.

Spark reaches the store through Hadoop's S3A filesystem (`spark.hadoop.fs.s3a.*` settings); the
Python side (delta-rs) through `storage_options`. `LakeObjectStore` is the one typed model both are
derived from, so an endpoint, a region or an addressing style is stated once. Credentials never go
into Spark's settings (which are logged, shown in the UI and passed on command lines): S3A reads
them from the environment variables `credentials_environment` returns, which a launcher puts in the
environment of its spark-submit process (readable only by its owner). Only delta-rs's options,
which stay inside the process that opens the table, carry them; `repr` masks them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

OBJECT_STORE_SCHEMES: Final = ("s3a://", "s3://")
"""Lake roots with these prefixes are on an object store; any other root is a local path."""

# Hadoop maps this AWS SDK v2 provider to AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY of the JVM's environment.
ENVIRONMENT_CREDENTIALS_PROVIDER: Final = (
    "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider"
)
ACCESS_KEY_ENV: Final = "AWS_ACCESS_KEY_ID"
SECRET_KEY_ENV: Final = "AWS_SECRET_ACCESS_KEY"


def is_object_store_root(root: str) -> bool:
    """True for a lake root on an object store (`s3a://bucket/...`), False for a local path."""
    return root.startswith(OBJECT_STORE_SCHEMES)


def delta_rs_uri(path: str) -> str:
    """`path` as delta-rs names it: the lake's `s3a://` (Hadoop's scheme, which Spark needs) as
    `s3://`, the scheme delta-rs documents for S3; any other path unchanged."""
    return "s3://" + path.removeprefix("s3a://") if path.startswith("s3a://") else path


class LakeObjectStore(BaseModel):
    """An S3-compatible endpoint and the login the platform uses on it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoint_url: str = Field(pattern=r"^https?://[^/\s]+/?$")
    """`http://127.0.0.1:9400` for the local stack's store; a team's S3 endpoint otherwise."""
    region: str = "us-east-1"
    path_style: bool = True
    """Bucket in the path (`host/bucket/key`), which every S3-compatible server accepts; False for
    virtual-hosted style (`bucket.host/key`), AWS's preferred form."""
    access_key_id: SecretStr
    secret_access_key: SecretStr

    @classmethod
    def from_spark_hadoop_conf(cls, conf: Mapping[str, str], environ: Mapping[str, str]) -> LakeObjectStore:
        """The store a Spark driver was started for: `spark_hadoop_conf`'s settings and the credentials
        `credentials_environment` put in its environment (ValueError naming what is missing, never a
        value)."""
        prefix = "spark.hadoop.fs.s3a."
        fields = {
            "endpoint_url": conf.get(f"{prefix}endpoint"),
            "region": conf.get(f"{prefix}endpoint.region", "us-east-1"),
            "path_style": conf.get(f"{prefix}path.style.access", "true") == "true",
            "access_key_id": environ.get(ACCESS_KEY_ENV),
            "secret_access_key": environ.get(SECRET_KEY_ENV),
        }
        try:
            return cls.model_validate(fields)
        except ValidationError as error:
            wrong = ", ".join(sorted({str(problem["loc"][0]) for problem in error.errors()}))
            raise ValueError(
                f"this driver's S3A settings and environment do not describe an object store ({wrong} "
                f"missing or invalid: {prefix}endpoint, {ACCESS_KEY_ENV} and {SECRET_KEY_ENV} are needed)"
            ) from None

    @property
    def uses_http(self) -> bool:
        return self.endpoint_url.startswith("http://")

    def spark_hadoop_conf(self) -> dict[str, str]:
        """Spark settings for S3A on this store; no credentials (S3A reads them from the environment)."""
        prefix = "spark.hadoop.fs.s3a."
        return {
            f"{prefix}impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
            f"{prefix}endpoint": self.endpoint_url.rstrip("/"),
            f"{prefix}endpoint.region": self.region,
            f"{prefix}path.style.access": str(self.path_style).lower(),
            f"{prefix}connection.ssl.enabled": str(not self.uses_http).lower(),
            f"{prefix}aws.credentials.provider": ENVIRONMENT_CREDENTIALS_PROVIDER,
            # Delta on s3a:// commits through its S3SingleDriverLogStore (its default for the scheme):
            # put-if-absent holds within one driver JVM only; stated here so the choice is visible.
            "spark.delta.logStore.s3a.impl": "io.delta.storage.S3SingleDriverLogStore",
        }

    def credentials_environment(self) -> dict[str, str]:
        """The environment variables S3A's credentials provider reads (secrets in clear: for a child's
        environment only, never for a command line or a log)."""
        return {
            ACCESS_KEY_ENV: self.access_key_id.get_secret_value(),
            SECRET_KEY_ENV: self.secret_access_key.get_secret_value(),
        }

    def delta_rs_storage_options(self) -> dict[str, str]:
        """delta-rs `storage_options` for tables on this store (secrets in clear: never log them).

        Commits are put-if-absent through S3 conditional writes (`If-None-Match: *`), which the store
        must honour: the local stack's S3Proxy does, as AWS S3 has since 2024. Two writers racing
        for one version then cannot both win, without a lock table (DynamoDB) and without
        delta-rs's unsafe-rename mode, which lets the second overwrite the first's commit.
        """
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url.rstrip("/"),
            "AWS_REGION": self.region,
            "AWS_ACCESS_KEY_ID": self.access_key_id.get_secret_value(),
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key.get_secret_value(),
            "AWS_ALLOW_HTTP": str(self.uses_http).lower(),
            "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": str(not self.path_style).lower(),
            "AWS_CONDITIONAL_PUT": "etag",
        }

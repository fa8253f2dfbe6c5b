"""`SparkSubmitOperator` whose spark-submit gets the allow-listed environment, not the worker's.

The Apache Spark provider's hook (`SparkSubmitHook.submit`, provider 6.x) starts spark-submit with
`os.environ.copy()` plus the task's `env_vars`, or with the whole environment inherited when there
are none: every Airflow secret of the task process (JWT secret, API secret key, Fernet key,
AIRFLOW_CONN_*) would reach spark-submit, the JVM and the Python driver. `PlatformSparkSubmitHook`
hands `submit` the environment `child_env.child_environment` builds from the same `env_vars`, and
`PlatformSparkSubmitOperator` is the stock operator using that hook; its arguments, templating and
UI are the provider's.

Secrets the job needs (its Kafka login, the object store's keys) come from `secret_environment`, a
function of the task's context called in `execute`: they go into spark-submit's environment only.
Not `env_vars`, a rendered template field (stored in the metadata DB, shown in the UI), and not the
task process's `os.environ`, which a process running several tasks (`dag.test()`) would keep for the
next one: a login of one run reaching the next run's job, also when that one's connection has none.

Not covered: the commands the provider itself runs after a cluster-mode submit (standalone driver
status polls and kills, `yarn application -kill`) still inherit the task's environment; the platform
submits in client mode (its Python jobs cannot run in standalone cluster mode), where the hook runs
none of them. `post_submit_commands` would run in client mode too, with the task's environment: the
platform sets none, and `PlatformSparkSubmitOperator` refuses them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from revenue_platform.child_env import child_environment


class PlatformSparkSubmitHook(SparkSubmitHook):
    """`SparkSubmitHook` that starts spark-submit with the allow-listed environment plus `env_vars`."""

    # The task's secret variables for this submit (set by `PlatformSparkSubmitOperator`).
    secret_environment: Mapping[str, str] = {}

    def submit(self, application: str = "", **kwargs: Any) -> str | None:
        env_vars = {key: str(value) for key, value in (self._env_vars or {}).items()}
        kwargs["env"] = {**child_environment(env_vars), **self.secret_environment}
        return super().submit(application, **kwargs)

    def _build_spark_submit_command(self, application: str) -> list[str]:
        command = super()._build_spark_submit_command(application)
        # The provider keeps env_vars in `_env` for its own Popen, where `submit` would rebuild the
        # environment from os.environ over our `env=`; they are already in it.
        self._env = None
        return command


class PlatformSparkSubmitOperator(SparkSubmitOperator):
    """`SparkSubmitOperator` running spark-submit through `PlatformSparkSubmitHook`; `secret_environment`
    (context -> variables) adds the task's secrets to spark-submit's environment, and nowhere else."""

    def __init__(
        self,
        *,
        secret_environment: Callable[[Any], Mapping[str, str]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._secret_environment = secret_environment
        self._secrets_of_this_run: dict[str, str] = {}

    def execute(self, context: Any) -> None:
        # Called per run, inside the task: a connection's current login, never one kept from before.
        # Updated in place: the provider keeps its hook between runs, and the hook reads this dict.
        self._secrets_of_this_run.clear()
        if self._secret_environment is not None:
            self._secrets_of_this_run.update(self._secret_environment(context))
        try:
            super().execute(context)
        finally:
            self._secrets_of_this_run.clear()

    def _get_hook(self) -> SparkSubmitHook:
        hook = super()._get_hook()
        if getattr(hook, "_post_submit_commands", None):
            raise ValueError(
                "post_submit_commands would run with the task's whole environment (Airflow's secrets "
                "included): the platform's spark-submit tasks take none"
            )
        # The provider's own construction (every operator argument, whatever the provider version
        # adds), then the subclass that only changes how spark-submit's environment is built.
        hook.__class__ = PlatformSparkSubmitHook
        cast(PlatformSparkSubmitHook, hook).secret_environment = self._secrets_of_this_run
        return hook

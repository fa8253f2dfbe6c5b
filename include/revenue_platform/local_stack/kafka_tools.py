"""Kafka's own command-line tools against the local broker: `make kafka CMD="kafka-topics --list"`.

What every Kafka user reaches for (`kafka-topics`, `kafka-consumer-groups`, the console consumer
and producer, `kafka-get-offsets`) comes from Maven Central like the broker (`include/jvm/kafka-tools/`,
fetched into `.jvm/kafka-tools/` by `make jvm`) and runs here on the JVM with the tool's main class,
so no Kafka distribution tarball is needed. `--bootstrap-server` defaults to the local broker(s)
(KAFKA_PORT); pass it to talk to another cluster. Arguments go to the tool as a list (no shell).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Final

from revenue_platform.errors import ConfigError, PrerequisiteError
from revenue_platform.local_stack.cluster import stack_bootstrap_servers
from revenue_platform.local_stack.service_jit import service_jit_options
from revenue_platform.paths import KAFKA_TOOLS_JARS_DIR, REPO_ROOT

# The scripts of a Kafka 4.3 distribution and the class each one runs (bin/kafka-*.sh).
TOOLS: Final = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
}
LOG4J2_CONFIG: Final = REPO_ROOT / "include" / "config" / "kafka-tools-log4j2.properties"


def kafka_tool_command(
    arguments: list[str], bootstrap_servers: str, jars_dir: Path = KAFKA_TOOLS_JARS_DIR
) -> list[str]:
    """The java command line of `arguments` = [tool, *tool arguments]; ConfigError for an unknown tool."""
    if not arguments or arguments[0] not in TOOLS:
        given = arguments[0] if arguments else "nothing"
        raise ConfigError(
            f"make kafka CMD=...: the first word must be one of {', '.join(TOOLS)} (got {given}); "
            'e.g. make kafka CMD="kafka-consumer-groups --describe --all-groups"'
        )
    tool, rest = arguments[0], arguments[1:]
    if not any(jars_dir.glob("kafka-tools-[0-9]*.jar")):
        raise PrerequisiteError(f"Kafka's tools are not in {jars_dir}; run `make jvm` to fetch them.")
    if not any(arg == "--bootstrap-server" or arg.startswith("--bootstrap-server=") for arg in rest):
        rest = ["--bootstrap-server", bootstrap_servers, *rest]
    return [
        "java",
        *service_jit_options(),
        "-Xmx256m",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}",
        "-cp",
        str(jars_dir / "*"),
        TOOLS[tool],
        *rest,
    ]


def run_kafka_tool(arguments: list[str]) -> int:
    """Run one of Kafka's tools against the local broker (or the one named); return its exit status."""
    from revenue_platform.local_stack.prerequisites import require_java

    require_java()
    bootstrap = stack_bootstrap_servers()
    return subprocess.run(kafka_tool_command(arguments, bootstrap), check=False).returncode

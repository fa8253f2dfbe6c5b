"""What the streaming driver's exit status tells whoever launched it.

The control plane launches the driver as a detached process and learns how it ended from its exit
status alone (`revenue_platform.processes.exit_code`): a crash (1, or a signal) may pass on a
restart from the checkpoint, a refusal (`DRIVER_REFUSED`) cannot, so the supervisor restarts the
one and marks the other failed at once, with the driver's own message.
"""

from __future__ import annotations

from typing import Final

DRIVER_CRASHED: Final = 1
"""The driver failed in a way a restart may get past (brokers out of reach, a failed batch)."""
DRIVER_REFUSED: Final = 2
"""The driver refused to start, and would refuse again unchanged: its config, the registry (topic
ownership) or its checkpoints (another Kafka cluster's, a retired engine's) say no. A person must act
(the message says how) and redeploy."""
DRIVER_SUPERSEDED: Final = 3
"""Another driver holds the deployment's lease: this one stopped writing and left."""

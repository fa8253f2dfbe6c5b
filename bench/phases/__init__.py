"""The benchmark's phases, each measuring one thing against the run's own broker and lake:
`replay` (production, both ceilings, the replay and the batch reprocess), `history` (cost as history
and windows grow), `live` (latency at a steady rate) and `control_plane` (the quality suite, DAG
parsing). bench.runner runs them in order."""

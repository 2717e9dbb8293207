"""The SQL backends' maintenance services, one per file, run by the workers off the
enqueue and settle paths (`tasuki.runtime.maintenance`): `expired` forgets finished ids
and locks past their time, `history` the history of messages that are gone, `results` the
result records past their time, `flows` the flows, barriers and slots past theirs.
PostgreSQL's archive adds its own (`tasuki.backends.postgres.archive`)."""

"""The pure domain: entities, the job state machine, retry policy, ingest rules. No I/O here."""

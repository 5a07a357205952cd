"""Job state in one home.

- `job_store.py`: `JobStore`, the local SQLite cache (all SQL, a versioned schema); a `JobRow` is one of its rows.
- `measurements.py`: the measured-throughput table of the store (a mixin of `JobStore`).
- `documents.py`: the account's documents of a job in S3 (`JobDocument`, `MeasurementDocument`), pure models.
- `account.py`: reads and writes those documents in the account's bucket (conditional writes).
- `sync.py`: the sync between the two: the account is the shared state, the store a cache of it."""

"""I/O use cases, one module per command family, over the typed plan and the job store: `plan` (the I/O shell
of planning: live or offline quotes, measured throughput), `launch`, `watch`, `doctor`, `calibration`
(prediction vs measurement), `duplicates` (a running job of the same spec). No rich and no SQL here: the CLI
renders, the store queries."""
